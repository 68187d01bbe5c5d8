/**
 * Turns a failed call into what an operator needs at 3 a.m.: the Connect code, the ErrorInfo
 * reason (what scripts branch on; never the message text), the server's message, a hint that
 * says what to do next, and an exit code (docs/cli.md).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { classifyOutcome, type Outcome } from "../../clients/typescript/src/index.js";
import { errorInfo, REASONS } from "../shared/domain/errors.js";
import { RetryInfoSchema } from "../shared/gen/google/rpc/error_details_pb.js";
import { EXIT_NOT_FOUND, EXIT_OUTCOME_UNKNOWN, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE } from "./exit-codes.js";

export interface ErrorReport {
  /** Connect code in its wire spelling ("not_found"). */
  code: string;
  /** google.rpc.ErrorInfo reason; "" when the server sent none (e.g. connection refused). */
  reason: string;
  /**
   * The client library's classification (clients/typescript/src/outcome.ts): "refused" (a
   * server's final answer), "retry-later", "unreachable" (nothing sent), "unknown" (no answer:
   * the call may have been carried out), "configuration" (TLS setup; nothing sent).
   */
  outcome: Outcome;
  message: string;
  metadata: Record<string, string>;
  /** Seconds to wait before retrying, when the server said so. */
  retryAfterSeconds?: number;
  hint: string;
  exitCode: number;
  /** Which endpoint was called, when known. */
  endpoint?: string;
  /** The server's trace id for the call (railfence-trace-id), to find its log lines and spans. */
  traceId?: string;
  /** The request id the server echoed (x-request-id; the CLI sends one per call). */
  requestId?: string;
}

/** "NotFound" -> "not_found": the spelling Connect and gRPC documentation use. */
export function codeName(code: Code): string {
  return (Code[code] ?? "unknown").replace(/[A-Z]/g, (m, i: number) => (i === 0 ? m.toLowerCase() : `_${m.toLowerCase()}`));
}

/** Seconds from google.rpc.RetryInfo, else from a Retry-After header; undefined when neither. */
export function retryAfterSeconds(err: ConnectError): number | undefined {
  const delay = err.findDetails(RetryInfoSchema)[0]?.retryDelay;
  if (delay) return Math.max(1, Math.ceil(Number(delay.seconds) + delay.nanos / 1e9));
  const header = err.metadata.get("retry-after");
  if (header && /^\d+$/.test(header)) return Math.max(1, Number(header));
  return undefined;
}

/**
 * Exit code, from the library's classification: a TLS configuration failure -> 2 (nothing was
 * sent; fix the setup); no answer on a call with an effect -> 6 (the outcome is unknown: never
 * "refused"); not_found -> 4; unavailable (connection refused, or a dependency behind the service
 * is down) and no answer on a read -> 3, since either way the next step is "retry later"; every
 * other server answer -> 1.
 */
export function exitCodeFor(err: ConnectError, hasEffect = false): number {
  const outcome = classifyOutcome(err);
  if (outcome === "configuration") return EXIT_USAGE;
  // A deadline the server itself reports (CALL_TIMEOUT) may follow a commit too: unknown as well.
  if (outcome === "unknown" && hasEffect) return EXIT_OUTCOME_UNKNOWN;
  if (outcome === "unknown" && !errorInfo(err)) return EXIT_UNREACHABLE;
  if (err.code === Code.NotFound) return EXIT_NOT_FOUND;
  if (err.code === Code.Unavailable) return EXIT_UNREACHABLE;
  if (err.code === Code.DeadlineExceeded && !errorInfo(err)) return EXIT_UNREACHABLE;
  return EXIT_REFUSED;
}

/**
 * What to do next, per reason (catalogue entries, compared by reason alone: PAYOUT_NOT_FOUND
 * gets one hint whichever service sent it). Money paths stress "do not resubmit": the rail is
 * not idempotent.
 */
export function hintFor(reason: string, err: ConnectError, retryAfter: number | undefined, endpoint?: string, hasEffect = false): string {
  const field = errorInfo(err)?.metadata.field;
  const wait = retryAfter ? `retry after ${retryAfter} s` : "retry later";
  switch (reason) {
    case REASONS.FENCED_OUT.reason:
      return "a newer fencing token was already used for this account: this holder lost its lock. Do not resubmit; acquire the lock again and check the payout first.";
    case REASONS.DUPLICATE_SUBMISSION.reason:
      return "this payout was already submitted once (it may have paid). Never resubmit; inspect it with `railfence submissions get <payout_id>`.";
    case REASONS.RAIL_AMBIGUOUS.reason:
      return "the rail's answer was lost: the money may or may not have moved. Do not resubmit. Run `railfence reconcile`, or check the rail statement and `railfence submissions resolve`.";
    case REASONS.IDEMPOTENCY_CONFLICT.reason:
      return "the first request with this Idempotency-Key is still in progress; retry with the same key (--idempotency-key) in a moment.";
    case REASONS.IDEMPOTENCY_UNAVAILABLE.reason:
      return `the idempotency store is down and nothing was executed; ${wait} with the same key (--idempotency-key).`;
    case REASONS.IDEMPOTENCY_KEY_REUSED.reason:
      return "this Idempotency-Key was already used for a different request; a different payout needs a new key.";
    case REASONS.IDEMPOTENCY_KEY_MISSING.reason:
      return "the request carried no Idempotency-Key; pass --idempotency-key or let the CLI mint one.";
    case REASONS.NOT_AMBIGUOUS.reason:
      return "only ambiguous submissions (TIMEOUT, or FORWARDING past the deadline) can be resolved; this one already has a clear outcome. See `railfence submissions get <payout_id>`.";
    case REASONS.SUBMISSION_NOT_FOUND.reason:
      return "the rail-proxy never admitted this payout, so nothing was sent to the rail for it. Check the payout id.";
    case REASONS.PAYOUT_NOT_FOUND.reason:
      return "no payout with this id; check the id (payout ids are assigned by the payouts service).";
    case REASONS.LOCK_HELD.reason:
      return "another holder has the lock; see who with `railfence locks inspect <key>` and wait for it to expire.";
    case REASONS.LEASE_LOST.reason:
      return "the lease expired or was taken over; acquire the lock again (and expect a new fencing token).";
    case REASONS.PAYDB_UNAVAILABLE.reason:
    case REASONS.PAYDB_NOT_PRIMARY.reason:
    case REASONS.RAIL_UNAVAILABLE.reason:
    case REASONS.LOCK_BACKEND_UNAVAILABLE.reason:
      return `a dependency behind the service is down; nothing was changed. ${wait[0]!.toUpperCase()}${wait.slice(1)}.`;
    case REASONS.PAGE_TOKEN_INVALID.reason:
      return "pass a --page-token exactly as a previous page printed it.";
  }
  if (field) return `fix the value of ${field} and try again.`;
  const outcome = classifyOutcome(err);
  if (outcome === "configuration") {
    return "the TLS handshake failed before any request was sent (no client certificate, or a CA that does not match the server's): check --tls-cert, --tls-key and --tls-ca (or RAILFENCE_TLS_*). Not retried.";
  }
  if (outcome === "unknown" && hasEffect) {
    return "no answer arrived (the connection was reset or the deadline passed after retries with the same key): the request may have been carried out. Repeat it with the same Idempotency-Key: that returns the result if it exists and runs it once if not.";
  }
  if (reason === "" && err.code === Code.Unavailable) {
    return `cannot reach ${endpoint ?? "the endpoint"}: is the service running and the address right? Check \`railfence endpoints\`.`;
  }
  if (reason === "" && err.code === Code.DeadlineExceeded) return "no answer in time (--timeout-ms); the service may be overloaded. For reads, retry.";
  if (err.code === Code.Unavailable) return `${wait[0]!.toUpperCase()}${wait.slice(1)}.`;
  return "";
}

/**
 * Describes any thrown value as an ErrorReport (non-Connect errors become code "unknown").
 * hasEffect: the call changes something (`payouts create`), so no answer is an unknown outcome.
 */
export function describeError(thrown: unknown, endpoint?: string, hasEffect = false): ErrorReport {
  const err = ConnectError.from(thrown);
  const info = errorInfo(err);
  const reason = info?.reason ?? "";
  const retryAfter = retryAfterSeconds(err);
  return {
    code: codeName(err.code),
    reason,
    outcome: classifyOutcome(err),
    message: err.rawMessage.trim(),
    metadata: { ...(info?.metadata ?? {}) },
    retryAfterSeconds: retryAfter,
    hint: hintFor(reason, err, retryAfter, endpoint, hasEffect),
    exitCode: exitCodeFor(err, hasEffect),
    endpoint,
    ...callIdsOf(err),
  };
}

/** The call's ids the server sent back (decision 054); none when no server answered. */
function callIdsOf(err: ConnectError): { traceId?: string; requestId?: string } {
  const traceId = err.metadata.get("railfence-trace-id") ?? undefined;
  const requestId = err.metadata.get("x-request-id") ?? undefined;
  return { ...(traceId ? { traceId } : {}), ...(requestId ? { requestId } : {}) };
}

/** The stderr text of a report for humans (the --json form is the report itself). */
export function formatErrorReport(r: ErrorReport): string {
  // Say what the failure means before the code: "no answer" must never read as "refused".
  const what =
    r.exitCode === EXIT_OUTCOME_UNKNOWN
      ? "outcome unknown (no answer; the request may have been carried out): "
      : r.outcome === "configuration"
        ? "client configuration (TLS; nothing was sent): "
        : "";
  const head = `error: ${what}${r.code}${r.reason ? ` ${r.reason}` : ""}: ${r.message}`;
  const lines = [head];
  const meta = Object.entries(r.metadata).map(([k, v]) => `${k}=${v}`);
  if (meta.length) lines.push(`  details: ${meta.join(" ")}`);
  if (r.endpoint) lines.push(`  endpoint: ${r.endpoint}`);
  if (r.traceId || r.requestId) lines.push(`  trace id: ${r.traceId ?? "(none)"}  request id: ${r.requestId ?? "(none)"}`);
  if (r.hint) lines.push(`hint: ${r.hint}`);
  return lines.join("\n");
}
