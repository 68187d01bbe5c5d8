/**
 * One place that turns domain failures into wire errors.
 *
 * Every rejection a client can see is a ConnectError whose details carry a
 * google.rpc.ErrorInfo (domain "railfence.dev", an UPPER_SNAKE reason). Reasons and their codes
 * come from the catalogue (reasons.ts): a throw site names an entry, `REASONS.FENCED_OUT`, and
 * never picks a code or spells a reason itself. Clients branch on code + reason, never on
 * message text. `unavailable` (503) and `resource_exhausted` (429) answers always carry a RetryInfo,
 * a Retry-After header and a grpc-retry-pushback-ms trailer, so that callers, gRPC's own retry and
 * generic HTTP retry middleware know when to come back (code-rule.ts, decision 053). The real cause is kept on the error (`cause`) for logs and is
 * never sent to the client.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema, RetryInfoSchema, type ErrorInfo } from "../gen/google/rpc/error_details_pb.js";
import { DEFAULT_RETRY_HINT_MS, sendsRetryHint } from "./code-rule.js";
import { ALL_REASONS, findReason, isReason, REASONS, type Reason, type ReasonEntry } from "./reasons.js";

export { ALL_REASONS, REASONS, findReason, type Reason, type ReasonEntry, type ReasonId } from "./reasons.js";

export const ERROR_DOMAIN = "railfence.dev";

/** A catalogue entry that travels with `code` (so field errors cannot name, say, FENCED_OUT). */
export type ReasonWithCode<C extends Code> = ReasonEntry & { readonly code: C };

/** A domain failure with a catalogued reason (its code comes with it); handlers map it with toConnectError. */
export class DomainError extends Error {
  readonly code: Code;
  readonly reason: Reason;

  constructor(
    readonly entry: ReasonEntry,
    message: string,
    readonly metadata: Record<string, string> = {},
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "DomainError";
    this.code = entry.code;
    this.reason = entry.reason;
  }
}

const CATALOGUED: ReadonlySet<ReasonEntry> = new Set(ALL_REASONS);

/**
 * True for the catalogue's own entries. The types already refuse a reason the catalogue does not
 * hold; this catches a cast around them, so that no refusal on the wire escapes the catalogue.
 */
export function isCatalogued(entry: ReasonEntry): boolean {
  return CATALOGUED.has(entry);
}

/** The ErrorInfo detail of a refusal. */
function errorInfoDetail(entry: ReasonEntry, metadata: Record<string, string>) {
  return { desc: ErrorInfoSchema, value: { reason: entry.reason, domain: ERROR_DOMAIN, metadata } };
}

/** The RetryInfo detail of a refusal with a retry hint. */
function retryInfoDetail(retryAfterMs: number) {
  const seconds = BigInt(Math.floor(retryAfterMs / 1000));
  const nanos = (retryAfterMs % 1000) * 1_000_000;
  return { desc: RetryInfoSchema, value: { retryDelay: create(DurationSchema, { seconds, nanos }) } };
}

/**
 * The hint's headers: Retry-After in whole seconds (RFC 9110; Connect sends error metadata as
 * response headers) and grpc-retry-pushback-ms (gRPC's retry design, A6; gRPC sends error metadata
 * as trailers). Each protocol's clients read their own and ignore the other.
 */
function setRetryHeaders(headers: Headers, retryAfterMs: number): void {
  if (!headers.has("retry-after")) headers.set("retry-after", String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  if (!headers.has("grpc-retry-pushback-ms")) headers.set("grpc-retry-pushback-ms", String(Math.max(0, Math.round(retryAfterMs))));
}

/**
 * Builds a ConnectError with the entry's code and an ErrorInfo carrying its reason, plus RetryInfo,
 * Retry-After and grpc-retry-pushback-ms when retryAfterMs is set, and always for a code that
 * generic retry middleware repeats (503, 429: DEFAULT_RETRY_HINT_MS when the throw site named no
 * hint). Throws a TypeError for anything but a catalogue entry.
 */
export function railError(
  entry: ReasonEntry,
  message: string,
  metadata: Record<string, string> = {},
  options: { retryAfterMs?: number; cause?: unknown } = {},
): ConnectError {
  if (!isCatalogued(entry)) throw new TypeError(`reason ${String(entry?.reason)} is not an entry of the catalogue (reasons.ts)`);
  const { cause } = options;
  const retryAfterMs = options.retryAfterMs ?? (sendsRetryHint(entry.code) ? DEFAULT_RETRY_HINT_MS : undefined);
  const details: { desc: typeof ErrorInfoSchema | typeof RetryInfoSchema; value: object }[] = [errorInfoDetail(entry, metadata)];
  const headers = new Headers();
  if (retryAfterMs !== undefined) {
    details.push(retryInfoDetail(retryAfterMs));
    setRetryHeaders(headers, retryAfterMs);
  }
  // The cast is needed because details is a heterogeneous list of (schema, init) pairs.
  return new ConnectError(message, entry.code, headers, details as never, cause);
}

const INTERNAL_MESSAGE = "internal error";

/**
 * Maps anything thrown inside a handler to a ConnectError safe to send to a client: every
 * refusal carries an ErrorInfo (a framework's ConnectError without one gets the catalogue's entry
 * for its code, whose reason is the code's name), and `internal`/`unknown` say only "internal
 * error", whatever the cause said.
 */
export function toConnectError(err: unknown): ConnectError {
  return withRetryHint(refusalFor(err));
}

/**
 * A 503 or 429 that reached the boundary without a hint (a framework refusal, or one relayed from
 * a dependency) gets the default one: no such answer leaves a railfence server without it.
 */
function withRetryHint(err: ConnectError): ConnectError {
  if (!sendsRetryHint(err.code)) return err;
  const info = err.findDetails(RetryInfoSchema)[0]?.retryDelay;
  const hasHeaders = err.metadata.has("retry-after") && err.metadata.has("grpc-retry-pushback-ms");
  if (info && hasHeaders) return err;
  const retryAfterMs = info ? Number(info.seconds) * 1000 + Math.round(info.nanos / 1e6) : DEFAULT_RETRY_HINT_MS;
  const headers = new Headers(err.metadata);
  setRetryHeaders(headers, retryAfterMs);
  const details = info ? err.details : [...err.details, retryInfoDetail(retryAfterMs)];
  return new ConnectError(err.rawMessage, err.code, headers, details as never, err.cause);
}

function refusalFor(err: unknown): ConnectError {
  if (err instanceof ConnectError) {
    // A framework size limit says resource_exhausted (429), which retry middleware would repeat;
    // the message will be as large next time: answered invalid_argument (decision 053).
    const answered = err.findDetails(ErrorInfoSchema).length > 0;
    if (err.code === Code.ResourceExhausted && !answered) {
      return railError(REASONS.MESSAGE_TOO_LARGE, err.rawMessage, {}, { cause: err.cause ?? err });
    }
    const framework = frameworkReason(err.code);
    if (err.code === Code.Internal || err.code === Code.Unknown || (!framework && !answered)) {
      if (err.rawMessage === INTERNAL_MESSAGE && errorReason(err) === REASONS.INTERNAL.reason) return err;
      return railError(REASONS.INTERNAL, INTERNAL_MESSAGE, {}, { cause: err.cause ?? err });
    }
    if (answered || !framework) return err;
    const info = errorInfoDetail(framework, {});
    return new ConnectError(err.rawMessage, err.code, err.metadata, [...err.details, info] as never, err.cause ?? err);
  }
  if (err instanceof DomainError) {
    if (!isCatalogued(err.entry)) {
      // A bug, not a refusal: answered as internal so that the wire never carries an unknown reason.
      return railError(REASONS.INTERNAL, INTERNAL_MESSAGE, {}, { cause: new TypeError(`uncatalogued reason ${String(err.entry?.reason)}`, { cause: err }) });
    }
    return railError(err.entry, err.message, err.metadata, { retryAfterMs: err.retryAfterMs, cause: err.cause ?? err });
  }
  // Unknown failures never leak their message (it may contain connection strings or SQL).
  return railError(REASONS.INTERNAL, INTERNAL_MESSAGE, {}, { cause: err });
}

/**
 * The catalogue's entry for a framework refusal with `code`: reason DEADLINE_EXCEEDED for
 * Code.DeadlineExceeded, and so on (resource_exhausted has none: toConnectError re-codes it).
 */
export function frameworkReason(code: Code): ReasonEntry | undefined {
  const name = (Code[code] ?? "UNKNOWN").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  return findReason(code, name);
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

/** True when err is a refusal with this catalogue entry: its code and its ErrorInfo reason. */
export function hasReason(err: unknown, entry: ReasonEntry): boolean {
  return isReason({ code: ConnectError.from(err).code, reason: errorReason(err) }, entry);
}

/** Shorthand for a field-level invalid_argument. */
export function invalidArgument(field: string, entry: ReasonWithCode<Code.InvalidArgument>, message: string): DomainError {
  return new DomainError(entry, message, { field });
}

/** Shorthand for "a dependency we need is down; retry later". */
export function unavailable(entry: ReasonWithCode<Code.Unavailable>, message: string, retryAfterMs = 1000, cause?: unknown): DomainError {
  return new DomainError(entry, message, {}, retryAfterMs, { cause });
}
