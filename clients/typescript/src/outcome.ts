/**
 * What a failed call means: the ONE classification every call of this library makes (payouts,
 * rail-proxy, retries, typed errors) and the railfence CLI reports from. It answers the question
 * a caller of a money API must answer before doing anything else: did the server answer, or is
 * the outcome unknown?
 *
 * - `refused`: a server answered with a final refusal (google.rpc.ErrorInfo whose reason the
 *   catalogue does not call transient), or the call was refused before it left (a code no
 *   transport failure produces: invalid_argument, unimplemented, ... without ErrorInfo). The same
 *   request gets the same answer; nothing was done.
 * - `retry-later`: a server answered that it did nothing now and a retry may succeed (ErrorInfo
 *   with a transient reason: IDEMPOTENCY_UNAVAILABLE, IDEMPOTENCY_CONFLICT, PAYDB_UNAVAILABLE, ...).
 * - `unreachable`: no connection was made (connection refused, host not found): nothing was sent.
 * - `unknown`: the request may or may not have run. Any transport failure once a connection
 *   existed: a reset (connect-node reports ECONNRESET and a destroyed stream as `aborted`), a
 *   stream torn down (`canceled`, `internal`, `unknown`, `data_loss`), `unavailable` without
 *   ErrorInfo, any deadline (the server may have committed just before it); and a server answer
 *   whose reason says this request's effect is unknown (RAIL_AMBIGUOUS).
 * - `configuration`: this client cannot talk to the server as configured (no client certificate,
 *   a CA that does not sign the server's certificate, a TLS handshake the server refused, an
 *   unreadable key). Retrying cannot help and nothing was sent: final, and reported as such.
 *
 * A call protected against duplicates (a read, or CreatePayout under its Idempotency-Key) retries
 * `retry-later`, `unreachable` and `unknown` (except a `check-status` answer) with the SAME key;
 * a call without protection (SubmitPayout) retries nothing.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { ALL_REASONS, REASONS } from "./reasons.js";

export type Outcome = "refused" | "retry-later" | "unreachable" | "unknown" | "configuration";

/** Codes a transport failure is reported with (connect-node, HTTP/2, a proxy in between). */
const TRANSPORT_CODES: ReadonlySet<Code> = new Set([
  Code.Aborted,
  Code.Canceled,
  Code.DeadlineExceeded,
  Code.Internal,
  Code.Unknown,
  Code.Unavailable,
  Code.DataLoss,
]);

/** Node error codes meaning no connection was ever made: the request did not leave. */
const NOT_CONNECTED: ReadonlySet<string> = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

/** OpenSSL's certificate verification results (Node's err.code for a server certificate it refuses). */
const CERT_VERIFY: ReadonlySet<string> = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "CERT_SIGNATURE_FAILURE",
  "CERT_NOT_YET_VALID",
  "CERT_HAS_EXPIRED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_CHAIN_TOO_LONG",
  "INVALID_CA",
  "INVALID_PURPOSE",
  "HOSTNAME_MISMATCH",
]);

/**
 * Answers that say THIS request's effect is unknown (the rail's answer was lost). Other
 * `check-status` reasons (DUPLICATE_SUBMISSION, PAYOUT_ALREADY_SUBMITTED) refuse this request —
 * nothing was forwarded by it — and point at an earlier one: a definite refusal.
 */
const EFFECT_UNKNOWN_REASONS: ReadonlySet<string> = new Set([REASONS.RAIL_AMBIGUOUS.reason]);

/** The reason catalogue's verdicts, by wire reason. */
const RETRY_BY_REASON: ReadonlyMap<string, string> = new Map(ALL_REASONS.map((e) => [e.reason, e.retry]));

function nodeCodes(err: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
  }
  return codes;
}

/** True when a TLS or key-material failure in the cause chain says this client is misconfigured. */
export function isConfigurationFailure(err: unknown): boolean {
  return nodeCodes(err).some((c) => CERT_VERIFY.has(c) || c.startsWith("ERR_SSL_") || c.startsWith("ERR_TLS_") || c.startsWith("ERR_OSSL_"));
}

/** The ErrorInfo reason a railfence server put on its answer; undefined for a transport failure. */
function answeredReason(err: ConnectError): string | undefined {
  return err.findDetails(ErrorInfoSchema)[0]?.reason;
}

/** The classification (see the file comment). */
export function classifyOutcome(thrown: unknown): Outcome {
  const err = ConnectError.from(thrown);
  const reason = answeredReason(err);
  if (reason !== undefined) {
    const retry = RETRY_BY_REASON.get(reason);
    // A deadline may pass after the handler committed: "it may have had an effect" (CALL_TIMEOUT).
    if (EFFECT_UNKNOWN_REASONS.has(reason) || err.code === Code.DeadlineExceeded) return "unknown";
    if (retry === "transient") return "retry-later";
    // A reason this catalogue does not know (a newer server): trust the code's usual meaning.
    if (retry === undefined && err.code === Code.Unavailable) return "retry-later";
    return "refused";
  }
  if (isConfigurationFailure(thrown)) return "configuration";
  if (!TRANSPORT_CODES.has(err.code)) return "refused";
  if (err.code === Code.Unavailable && nodeCodes(thrown).some((c) => NOT_CONNECTED.has(c))) return "unreachable";
  return "unknown";
}

/**
 * May a call with this protection retry after this failure? Only a protected call retries, and
 * only what may succeed on a repeat without doing anything twice: `retry-later`, `unreachable`,
 * and `unknown` unless the server said the effect must be checked, not repeated (check-status).
 */
export function isRetryable(thrown: unknown, idempotent: boolean): boolean {
  if (!idempotent) return false;
  const outcome = classifyOutcome(thrown);
  if (outcome === "retry-later" || outcome === "unreachable") return true;
  if (outcome !== "unknown") return false;
  const reason = answeredReason(ConnectError.from(thrown));
  return reason === undefined || RETRY_BY_REASON.get(reason) !== "check-status";
}
