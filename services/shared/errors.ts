/**
 * One place that turns domain failures into wire errors.
 *
 * Every rejection a client can see is a ConnectError whose details carry a
 * google.rpc.ErrorInfo (domain "railfence.dev", an UPPER_SNAKE reason). Reasons and their codes
 * come from the catalogue (reasons.ts): a throw site names an entry, `REASONS.FENCED_OUT`, and
 * never picks a code or spells a reason itself. Clients branch on code + reason, never on
 * message text. `unavailable` answers also carry a RetryInfo and a Retry-After header so
 * callers know when to come back. The real cause is kept on the error (`cause`) for logs and is
 * never sent to the client.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { ErrorInfoSchema, RetryInfoSchema, type ErrorInfo } from "./gen/google/rpc/error_details_pb.js";
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

/**
 * Builds a ConnectError with the entry's code and an ErrorInfo carrying its reason (plus RetryInfo
 * and Retry-After when retryAfterMs is set). Throws a TypeError for anything but a catalogue entry.
 */
export function railError(
  entry: ReasonEntry,
  message: string,
  metadata: Record<string, string> = {},
  options: { retryAfterMs?: number; cause?: unknown } = {},
): ConnectError {
  if (!isCatalogued(entry)) throw new TypeError(`reason ${String(entry?.reason)} is not an entry of the catalogue (reasons.ts)`);
  const { retryAfterMs, cause } = options;
  const details: { desc: typeof ErrorInfoSchema | typeof RetryInfoSchema; value: object }[] = [errorInfoDetail(entry, metadata)];
  const headers = new Headers();
  if (retryAfterMs !== undefined) {
    const seconds = BigInt(Math.floor(retryAfterMs / 1000));
    const nanos = (retryAfterMs % 1000) * 1_000_000;
    details.push({ desc: RetryInfoSchema, value: { retryDelay: create(DurationSchema, { seconds, nanos }) } });
    headers.set("retry-after", String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
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
  if (err instanceof ConnectError) {
    const framework = frameworkReason(err.code);
    if (err.code === Code.Internal || err.code === Code.Unknown || !framework) {
      if (err.rawMessage === INTERNAL_MESSAGE && errorReason(err) === REASONS.INTERNAL.reason) return err;
      return railError(REASONS.INTERNAL, INTERNAL_MESSAGE, {}, { cause: err.cause ?? err });
    }
    if (err.findDetails(ErrorInfoSchema).length > 0) return err;
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

/** The catalogue's entry for a framework refusal with `code`: reason DEADLINE_EXCEEDED for Code.DeadlineExceeded, and so on. */
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
