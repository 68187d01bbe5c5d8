/**
 * One place that turns domain failures into wire errors.
 *
 * Every rejection a client can see is a ConnectError whose details carry a
 * google.rpc.ErrorInfo (domain "railfence.dev", an UPPER_SNAKE reason). Clients branch on
 * code + reason, never on message text. `unavailable` answers also carry a RetryInfo and a
 * Retry-After header so callers know when to come back. The real cause is kept on the error
 * (`cause`) for logs and is never sent to the client.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema, RetryInfoSchema, type ErrorInfo } from "./gen/google/rpc/error_details_pb.js";

export const ERROR_DOMAIN = "railfence.dev";

/** A domain failure with a machine-readable reason; handlers map it with toConnectError. */
export class DomainError extends Error {
  constructor(
    readonly code: Code,
    readonly reason: string,
    message: string,
    readonly metadata: Record<string, string> = {},
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "DomainError";
  }
}

/** Builds a ConnectError with ErrorInfo (and RetryInfo + Retry-After when retryAfterMs is set). */
export function railError(
  code: Code,
  reason: string,
  message: string,
  metadata: Record<string, string> = {},
  retryAfterMs?: number,
  cause?: unknown,
): ConnectError {
  const details: { desc: typeof ErrorInfoSchema | typeof RetryInfoSchema; value: object }[] = [
    { desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN, metadata } },
  ];
  const headers = new Headers();
  if (retryAfterMs !== undefined) {
    const seconds = BigInt(Math.floor(retryAfterMs / 1000));
    const nanos = (retryAfterMs % 1000) * 1_000_000;
    details.push({ desc: RetryInfoSchema, value: { retryDelay: create(DurationSchema, { seconds, nanos }) } });
    headers.set("retry-after", String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  }
  // The cast is needed because details is a heterogeneous list of (schema, init) pairs.
  return new ConnectError(message, code, headers, details as never, cause);
}

const INTERNAL_MESSAGE = "internal error";

/**
 * Maps anything thrown inside a handler to a ConnectError safe to send to a client: every
 * refusal carries an ErrorInfo (a framework's ConnectError without one gets its code's name as
 * the reason), and `internal`/`unknown` say only "internal error", whatever the cause said.
 */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) {
    if (err.code === Code.Internal || err.code === Code.Unknown) {
      if (err.rawMessage === INTERNAL_MESSAGE && errorReason(err) === "INTERNAL") return err;
      return railError(Code.Internal, "INTERNAL", INTERNAL_MESSAGE, {}, undefined, err.cause ?? err);
    }
    if (err.findDetails(ErrorInfoSchema).length > 0) return err;
    const info = { desc: ErrorInfoSchema, value: { reason: codeReason(err.code), domain: ERROR_DOMAIN, metadata: {} } };
    return new ConnectError(err.rawMessage, err.code, err.metadata, [...err.details, info] as never, err.cause ?? err);
  }
  if (err instanceof DomainError) {
    return railError(err.code, err.reason, err.message, err.metadata, err.retryAfterMs, err.cause ?? err);
  }
  // Unknown failures never leak their message (it may contain connection strings or SQL).
  return railError(Code.Internal, "INTERNAL", INTERNAL_MESSAGE, {}, undefined, err);
}

/** DEADLINE_EXCEEDED for Code.DeadlineExceeded, and so on. */
function codeReason(code: Code): string {
  return (Code[code] ?? "UNKNOWN").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** Reads the ErrorInfo reason of a ConnectError (empty string when absent). */
export function errorReason(err: unknown): string {
  const info = errorInfo(err);
  return info?.reason ?? "";
}

/** Reads the ErrorInfo detail of a ConnectError. */
export function errorInfo(err: unknown): ErrorInfo | undefined {
  const ce = ConnectError.from(err);
  return ce.findDetails(ErrorInfoSchema)[0];
}

/** Shorthand for a field-level invalid_argument. */
export function invalidArgument(field: string, reason: string, message: string): DomainError {
  return new DomainError(Code.InvalidArgument, reason, message, { field });
}

/** Shorthand for "a dependency we need is down; retry later". */
export function unavailable(reason: string, message: string, retryAfterMs = 1000, cause?: unknown): DomainError {
  return new DomainError(Code.Unavailable, reason, message, {}, retryAfterMs, { cause });
}
