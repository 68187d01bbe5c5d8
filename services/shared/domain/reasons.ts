/**
 * The catalogue of error reasons: every google.rpc.ErrorInfo reason a railfence server puts on
 * a refusal (domain "railfence.dev"), the Connect code it travels with, whether a caller may
 * retry, and what it means. It is the one place a reason is defined:
 *
 * - servers build refusals from its entries only (`railError(REASONS.FENCED_OUT, ...)` in
 *   services/shared/domain/errors.ts takes the code from here, so no throw site chooses a code);
 * - clients, the CLI and the executor compare answers with its entries (`isReason`), never
 *   with string literals;
 * - docs/errors.md is generated from it, and the client library ships a verbatim copy
 *   (clients/typescript/src/reasons.ts), both by `npm run generate`; CI fails when either drifts.
 *
 * Keep this file self-contained (it imports nothing but @connectrpc/connect): the copy must
 * compile inside the published package, which cannot reach outside its folder.
 * Why a TypeScript table and not a proto enum: docs/decisions/014-reason-catalogue.md.
 */
import { Code } from "@connectrpc/connect";

/**
 * What a caller may do after a refusal:
 * - `transient`: the same request may succeed later. A call protected against duplicates (a
 *   read, or CreatePayout under its Idempotency-Key) retries it with backoff, never sooner than
 *   the retry hint; @railfence/client does this on its own.
 * - `later`: the same request succeeds only once a condition clears (a lease expires, a limit
 *   window resets); the caller decides when, not before the retry hint. Not retried on its own.
 * - `check-status`: the request may already have taken effect: never send it again, read the
 *   status (GetSubmission) instead.
 * - `final`: the same request gets the same answer; change the request or stop.
 *
 * A call without duplicate protection (SubmitPayout) is never retried, whatever the reason.
 */
export type Retry = "transient" | "later" | "check-status" | "final";

/** Where a reason comes from; the sections of docs/errors.md, in this order. */
export const AREAS = {
  gate: "Any service: the request gate (before a handler runs)",
  fields: "Any service: field validation",
  server: "Any service: authorization, deadlines, shutdown, health",
  paydb: "rail-proxy and payouts: paydb",
  railProxy: "rail-proxy (RailProxyService)",
  payouts: "payouts (PayoutService)",
  lock: "lock (LockService)",
  rail: "rail stub (RailService, the third party's stand-in)",
  framework: "Any service: refusals of the RPC framework (no railfence reason; the code's name is the reason)",
} as const;
export type Area = keyof typeof AREAS;

interface Definition {
  readonly code: Code;
  readonly retry: Retry;
  readonly area: Area;
  /** One line: what happened, and what did not. */
  readonly meaning: string;
  /** The wire reason, when it is not the id (a reason sent with two codes has two entries). */
  readonly reason?: string;
}

const DEFINITIONS = {
  // --- the request gate (request-gate.ts, request-decode.ts) ---
  REQUEST_TOO_LARGE: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "gate",
    meaning: "The request message is larger than the server's limit (metadata limit_bytes); refused at the first bytes that prove it.",
  },
  REQUEST_READ_TIMEOUT: {
    code: Code.DeadlineExceeded,
    retry: "transient",
    area: "gate",
    meaning: "The request body did not arrive within the client's deadline or the server's read timeout (metadata bound, timeout_ms); nothing ran.",
  },
  TIMEOUT_TOO_LONG: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "gate",
    meaning: "The client asked for a longer deadline than the server allows (metadata field names the header).",
  },
  UNSUPPORTED_CONTENT_TYPE: {
    code: Code.Unimplemented,
    retry: "final",
    area: "gate",
    meaning: "The content type is not gRPC, gRPC-Web or Connect with protobuf or JSON (HTTP 415).",
  },
  COMPRESSION_UNSUPPORTED: {
    code: Code.Unimplemented,
    retry: "final",
    area: "gate",
    meaning: "The request encoding is not one the server accepts; the accept-encoding header lists those it does.",
  },
  METHOD_NOT_FOUND: {
    code: Code.Unimplemented,
    retry: "final",
    area: "gate",
    meaning: "No service on this server implements the path (HTTP 404 for Connect).",
  },
  METHOD_NOT_ALLOWED: { code: Code.Unimplemented, retry: "final", area: "gate", meaning: "Only POST is served (HTTP 405)." },
  MALFORMED_REQUEST: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "gate",
    meaning: "The body is not exactly one well-formed message of the method's type (metadata problem, and field when one is at fault).",
  },
  UNKNOWN_FIELD: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "gate",
    meaning: "A JSON request names a field the method's message does not have (metadata field, its path); a typo is refused, never dropped: nothing ran.",
  },

  // --- field validation (validation.ts and the handlers) ---
  FIELD_REQUIRED: { code: Code.InvalidArgument, retry: "final", area: "fields", meaning: "A required field is empty (metadata field)." },
  FIELD_INVALID: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "fields",
    meaning: "A field's value is outside its allowed form or set (metadata field).",
  },
  FIELD_TOO_LONG: { code: Code.InvalidArgument, retry: "final", area: "fields", meaning: "A free-text field is longer than allowed (metadata field)." },
  TOKEN_INVALID: { code: Code.InvalidArgument, retry: "final", area: "fields", meaning: "A fencing token is outside 1..2^63-1 (metadata field)." },
  AMOUNT_INVALID: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "fields",
    meaning: "An amount is not a positive number of minor units within 10^15 (metadata field).",
  },
  CURRENCY_INVALID: { code: Code.InvalidArgument, retry: "final", area: "fields", meaning: "A currency is not an ISO-4217 code (metadata field)." },
  TIMESTAMP_INVALID: { code: Code.InvalidArgument, retry: "final", area: "fields", meaning: "A timestamp is outside 0001-01-01..9999-12-31 (metadata field)." },
  PAGE_SIZE_INVALID: { code: Code.InvalidArgument, retry: "final", area: "fields", meaning: "page_size is above the method's maximum." },
  PAGE_TOKEN_INVALID: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "fields",
    meaning: "page_token is not a token this service issued (for this filter); pass it back exactly as received.",
  },

  // --- every server (authz.ts, server.ts, health.ts, errors.ts) ---
  PERMISSION_DENIED: {
    code: Code.PermissionDenied,
    retry: "final",
    area: "server",
    meaning: "The caller's certificate identity may not call this method, or mutual TLS saw no client certificate (metadata identity, method).",
  },
  CALL_TIMEOUT: {
    code: Code.DeadlineExceeded,
    retry: "transient",
    area: "server",
    meaning: "A call without a client deadline ran past the server's own bound; it may have had an effect, so only protected calls retry it.",
  },
  SHUTTING_DOWN: {
    code: Code.Unavailable,
    retry: "transient",
    area: "server",
    meaning: "The server is draining for shutdown and cut this call; another replica answers a retry.",
  },
  SERVICE_UNKNOWN: { code: Code.NotFound, retry: "final", area: "server", meaning: "grpc.health.v1 Check named a service this server does not serve." },
  INTERNAL: {
    code: Code.Internal,
    retry: "final",
    area: "server",
    meaning: 'An unexpected failure inside the server; the message says only "internal error", the cause is in the server\'s log.',
  },

  // --- paydb (pg.ts, for rail-proxy and payouts) ---
  PAYDB_UNAVAILABLE: {
    code: Code.Unavailable,
    retry: "transient",
    area: "paydb",
    meaning: "paydb cannot be reached; nothing was changed (SubmitPayout: nothing was forwarded).",
  },
  PAYDB_NOT_DURABLE: {
    code: Code.Unavailable,
    retry: "transient",
    area: "paydb",
    meaning:
      "paydb is declared synchronous-standby (PAYDB_DURABILITY) but no synchronous standby is attached: a failover could forget the admission, so nothing was admitted or forwarded.",
  },
  PAYDB_BUSY: {
    code: Code.Unavailable,
    retry: "transient",
    area: "paydb",
    meaning: "paydb did not answer in time (statement timeout or lock wait: load, a long transaction); nothing was changed. Retry after the hint.",
  },
  PAYDB_NOT_PRIMARY: {
    code: Code.Unavailable,
    retry: "transient",
    area: "paydb",
    meaning: "The connection reached a paydb standby; only a primary is used, so nothing was read or written.",
  },

  // --- rail-proxy (proxy-handlers.ts) ---
  FENCED_OUT: {
    code: Code.Aborted,
    retry: "final",
    area: "railProxy",
    meaning: "The fencing token is not above the account's high-water mark: a newer holder exists. The rail was not called (metadata account_id).",
  },
  DUPLICATE_SUBMISSION: {
    code: Code.AlreadyExists,
    retry: "check-status",
    area: "railProxy",
    meaning: "This submission reference was already admitted, and may have paid; read it with GetSubmission.",
  },
  PAYOUT_ALREADY_SUBMITTED: {
    code: Code.AlreadyExists,
    retry: "check-status",
    area: "railProxy",
    meaning: "The payout already has a live submission under another reference (metadata live_submission); settle that one.",
  },
  BOUND_PAYOUT_NOT_FOUND: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "railProxy",
    meaning: "SubmitPayout: no payout in paydb has the id the reference names; the rail was not called.",
  },
  PAYOUT_MISMATCH: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "railProxy",
    meaning: "SubmitPayout: a field differs from the paydb payout's (metadata field); the rail was not called.",
  },
  PAYOUT_NOT_PAYABLE: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "railProxy",
    meaning: "SubmitPayout: the payout is not PROCESSING (metadata state); the rail was not called.",
  },
  PAYOUT_FENCE_MISMATCH: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "railProxy",
    meaning: "SubmitPayout: the payout is not fenced with this token (metadata holder: NEWER when a newer token fenced it); the rail was not called.",
  },
  TOKEN_SIGNATURE_INVALID: {
    code: Code.PermissionDenied,
    retry: "final",
    area: "railProxy",
    meaning: "SubmitPayout: the token's signature is missing, or was not made by the lock service for this account.",
  },
  NOT_FORWARDED: {
    code: Code.Aborted,
    retry: "final",
    area: "railProxy",
    meaning: "Admission took longer than the pre-forward budget: the rail was not called, nothing was paid. Submit again under a new reference.",
  },
  RAIL_AMBIGUOUS: {
    code: Code.Aborted,
    retry: "check-status",
    area: "railProxy",
    meaning: "The rail's answer was lost: the payment may or may not have happened. Never resubmit; the submission is reconciled.",
  },
  SUBMISSION_NOT_FOUND: {
    code: Code.NotFound,
    retry: "final",
    area: "railProxy",
    meaning: "No submission under this reference: the proxy never admitted it, so nothing was sent to the rail.",
  },
  NOT_AMBIGUOUS: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "railProxy",
    meaning: "ResolveSubmission: the submission already has a clear outcome (metadata state); only ambiguous ones are resolved.",
  },
  RESOLUTION_TOO_EARLY: {
    code: Code.FailedPrecondition,
    retry: "later",
    area: "railProxy",
    meaning:
      "ResolveSubmission NOT_PAID: the submission is younger than the proxy's floor (metadata min_age_ms), before which its request may still reach the rail; wait, or force it with a reason.",
  },
  NOT_RESOLVED_NOT_PAID: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "railProxy",
    meaning: "RecordContradiction: only a submission resolved NOT_PAID can be contradicted (metadata state).",
  },
  RAIL_UNAVAILABLE: { code: Code.Unavailable, retry: "transient", area: "railProxy", meaning: "GetRailStatement: the rail's statement could not be read." },

  // --- payouts (payout-handlers.ts, create-payout.ts, idempotency.ts, limits.ts) ---
  PAYOUT_NOT_FOUND: {
    code: Code.NotFound,
    retry: "final",
    area: "payouts",
    meaning:
      "GetPayout, LookupPayout: no payout with this id, idempotency key or client reference (another client's payout is indistinguishable from a missing one).",
  },
  CLIENT_REFERENCE_AMBIGUOUS: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "payouts",
    meaning: "LookupPayout: several of the caller's payouts carry this client reference (metadata count); look up by idempotency key or list them.",
  },
  IDEMPOTENCY_KEY_MISSING: { code: Code.InvalidArgument, retry: "final", area: "payouts", meaning: "CreatePayout carried no idempotency-key header." },
  IDEMPOTENCY_KEY_INVALID: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "payouts",
    meaning: "The idempotency-key is longer than 255 characters or not visible ASCII.",
  },
  IDEMPOTENCY_KEY_REUSED: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "payouts",
    meaning: "The key was already used with a different request body (the IETF draft's 422); a new payout needs a new key.",
  },
  IDEMPOTENCY_CONFLICT: {
    // aborted (409) is the SPEC's answer (the Idempotency-Key table); retryable by its reason and
    // hint, never by the status (code-rule.ts: the one named exception).
    code: Code.Aborted,
    retry: "transient",
    area: "payouts",
    meaning: "The first request with this key is still in progress; retry with the same key shortly.",
  },
  IDEMPOTENCY_UNAVAILABLE: {
    code: Code.Unavailable,
    retry: "transient",
    area: "payouts",
    meaning: "The idempotency store is unavailable; nothing was executed. Retry with the same key.",
  },
  CLIENT_RATE_LIMITED: {
    code: Code.ResourceExhausted,
    retry: "later",
    area: "payouts",
    meaning: "Too many payout-creating requests from this client in the window; retry after the hint with the same key.",
  },
  ACCOUNT_DAILY_LIMIT_EXCEEDED: {
    code: Code.ResourceExhausted,
    retry: "later",
    area: "payouts",
    meaning:
      "This client's daily amount on the account in this currency would be exceeded (metadata used: this client's own spending only); retry after the hint (the day's reset) with the same key.",
  },
  PAYOUT_ABOVE_DAILY_LIMIT: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "payouts",
    meaning:
      "This payout alone is larger than the client's whole daily limit on the account in this currency (metadata limit_value): it can never pass while the limit stands; nothing was executed.",
  },
  LIMITS_CONTENDED: {
    code: Code.Unavailable,
    retry: "transient",
    area: "payouts",
    meaning: "This client and account's limit counter stayed locked by concurrent payouts past the server's wait (load, not an outage); nothing was executed.",
  },
  LIMITS_UNAVAILABLE: {
    code: Code.Unavailable,
    retry: "transient",
    area: "payouts",
    meaning: "The money-limit store is unavailable, so money movement refuses (fail closed); nothing was executed.",
  },

  // --- lock (lock-handlers.ts, lock-validation.ts) ---
  LOCK_HELD: {
    code: Code.Aborted,
    retry: "later",
    area: "lock",
    meaning: "Acquire: another lease held the key for all of wait_ms; try again once it is released or expires.",
  },
  LEASE_LOST: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "lock",
    meaning: "Renew: the lease expired, was released or superseded; acquire again (and get a new token).",
  },
  LEASE_NOT_HELD: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "lock",
    meaning: "Release: the lease is not the key's current one; nothing changed (a holder retrying a lost answer treats it as done).",
  },
  LOCK_BACKEND_UNAVAILABLE: {
    code: Code.Unavailable,
    retry: "transient",
    area: "lock",
    meaning: "The lock backend (lockdb or etcd) is unreachable; no lease was changed.",
  },
  ACQUIRE_ABANDONED: { code: Code.Canceled, retry: "final", area: "lock", meaning: "Acquire: the caller went away while waiting; nothing was granted." },
  KEY_INVALID: { code: Code.InvalidArgument, retry: "final", area: "lock", meaning: "A lock key is not 1-200 characters of [A-Za-z0-9._:/-]." },
  TTL_INVALID: { code: Code.InvalidArgument, retry: "final", area: "lock", meaning: "ttl_ms is outside the allowed range." },
  WAIT_INVALID: { code: Code.InvalidArgument, retry: "final", area: "lock", meaning: "wait_ms is outside the allowed range." },
  LEASE_ID_INVALID: { code: Code.InvalidArgument, retry: "final", area: "lock", meaning: "lease_id is not a lease id this service issued." },

  // --- rail stub (rail-stub/auth.ts) ---
  RAIL_CREDENTIAL_INVALID: { code: Code.Unauthenticated, retry: "final", area: "rail", meaning: "The rail's bearer credential is missing or wrong." },

  // --- the framework: a ConnectError without ErrorInfo gets its code's name (errors.ts) ---
  // PERMISSION_DENIED and INTERNAL are above; UNKNOWN is always answered as INTERNAL, and a
  // framework resource_exhausted (a message size limit) as MESSAGE_TOO_LARGE.
  CANCELED: {
    code: Code.Canceled,
    retry: "final",
    area: "framework",
    meaning: "The call was cancelled: the caller left, or the server stopped waiting for it.",
  },
  INVALID_ARGUMENT: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "framework",
    meaning: "The framework refused the request as invalid, before railfence's own checks.",
  },
  DEADLINE_EXCEEDED: {
    code: Code.DeadlineExceeded,
    retry: "transient",
    area: "framework",
    meaning: "The call's deadline passed; it may have had an effect, so only protected calls retry it.",
  },
  NOT_FOUND: { code: Code.NotFound, retry: "final", area: "framework", meaning: "The framework found nothing to serve the call." },
  ALREADY_EXISTS: {
    code: Code.AlreadyExists,
    retry: "final",
    area: "framework",
    meaning: "From the framework; railfence's own checks always give this code a reason.",
  },
  MESSAGE_TOO_LARGE: {
    code: Code.InvalidArgument,
    retry: "final",
    area: "framework",
    meaning:
      "A message passed the framework's own size limit (its resource_exhausted, answered invalid_argument: it will not shrink). The gate usually refuses first.",
  },
  FAILED_PRECONDITION: {
    code: Code.FailedPrecondition,
    retry: "final",
    area: "framework",
    meaning: "From the framework; railfence's own checks always give this code a reason.",
  },
  ABORTED: { code: Code.Aborted, retry: "final", area: "framework", meaning: "From the framework; railfence's own checks always give this code a reason." },
  OUT_OF_RANGE: {
    code: Code.OutOfRange,
    retry: "final",
    area: "framework",
    meaning: "From the framework; railfence's own checks always give this code a reason.",
  },
  UNIMPLEMENTED: {
    code: Code.Unimplemented,
    retry: "final",
    area: "framework",
    meaning: "The method or a protocol feature the call needs is not implemented.",
  },
  UNAVAILABLE: {
    code: Code.Unavailable,
    retry: "transient",
    area: "framework",
    meaning: "The framework could not serve the call now (a stream or connection failure).",
  },
  DATA_LOSS: { code: Code.DataLoss, retry: "final", area: "framework", meaning: "From the framework; railfence's own checks always give this code a reason." },
  UNAUTHENTICATED: { code: Code.Unauthenticated, retry: "final", area: "framework", meaning: "The framework refused the call as unauthenticated." },
} as const satisfies Record<string, Definition>;

type Definitions = typeof DEFINITIONS;

/** A catalogue id: the wire reason itself, except where one reason travels with two codes. */
export type ReasonId = keyof Definitions;

type WireReason<K extends ReasonId> = Definitions[K] extends { readonly reason: infer R extends string } ? R : K;

/** One catalogue entry: a (code, reason) pair a server may answer with. */
export interface ReasonEntry<K extends ReasonId = ReasonId> {
  readonly id: K;
  /** The google.rpc.ErrorInfo reason on the wire. */
  readonly reason: WireReason<K>;
  readonly code: Definitions[K]["code"];
  readonly retry: Retry;
  readonly area: Area;
  readonly meaning: string;
}

/** Every reason string a railfence server may send. */
export type Reason = WireReason<ReasonId>;

/** The catalogue, by id: `REASONS.FENCED_OUT.code`, `railError(REASONS.FENCED_OUT, ...)`. */
export const REASONS: { readonly [K in ReasonId]: ReasonEntry<K> } = Object.freeze(
  Object.fromEntries(
    Object.entries(DEFINITIONS).map(([id, d]: [string, Definition]) => {
      const entry = { id, reason: d.reason ?? id, code: d.code, retry: d.retry, area: d.area, meaning: d.meaning };
      return [id, Object.freeze(entry)];
    }),
  ),
) as never;

/** Every entry, in catalogue order. */
export const ALL_REASONS: readonly ReasonEntry[] = Object.freeze(Object.values(REASONS));

/** The entry for a (code, reason) answer; undefined when the catalogue has no such pair. */
export function findReason(code: Code, reason: string): ReasonEntry | undefined {
  return ALL_REASONS.find((e) => e.code === code && e.reason === reason);
}

/** True when an answer ({code, reason}, as RailfenceError carries them) is this entry. */
export function isReason(answer: { readonly code: Code; readonly reason: string }, entry: ReasonEntry): boolean {
  return answer.code === entry.code && answer.reason === entry.reason;
}

/** The reason strings whose answers are `transient` (retried by calls protected against duplicates). */
export const TRANSIENT_REASONS: ReadonlySet<string> = new Set(ALL_REASONS.filter((e) => e.retry === "transient").map((e) => e.reason));
