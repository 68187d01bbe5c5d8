/**
 * Which Connect codes a reason of each retry class may travel with (decision 053), and which
 * codes always carry a retry hint.
 *
 * Why: generic HTTP retry middleware (proxies, SDK retry wrappers, service meshes) reads only the
 * status. Connect sends resource_exhausted as 429 and unavailable as 503, and those middlewares
 * repeat such a request after its Retry-After. So a 429 or 503 must mean "the same request may
 * succeed after the hint", and must carry the hint; a refusal that will never change (`final`) or
 * that must not be repeated (`check-status`) must use a code they leave alone.
 *
 * The rule, code by code (rule C1):
 * - unavailable (503): `transient` only; a retry hint always (RetryInfo, Retry-After, and for gRPC
 *   grpc-retry-pushback-ms).
 * - resource_exhausted (429): `later` only (a limit window the server can date); a hint always.
 * - deadline_exceeded (504): `transient` only (a deadline passed; the server cannot date a retry,
 *   so no hint).
 * - aborted (409): `later`, `check-status` or `final`: the request met another party's state (a
 *   newer fence, a held lock, a lost rail answer); never repeated as is, so never `transient`.
 * - already_exists (409): `check-status` or `final`.
 * - failed_precondition (400): `later` or `final` (a state that must change first).
 * - every other code: `final`.
 *
 * One named exception, fixed by the SPEC's Idempotency-Key table: IDEMPOTENCY_CONFLICT is
 * `aborted` (409) and `transient` (the first request with the key is still running; the same
 * request with the same key succeeds or replays shortly). A 409 is a status generic middleware
 * leaves alone, so the exception errs on the side of not repeating; the reason, RetryInfo and
 * Retry-After carry the retry to clients that read them (the library does).
 */
import { Code } from "@connectrpc/connect";
import type { Retry } from "./reasons.js";

/** The retry classes each code may carry (rule C1 above); codes not listed: `final` only. */
export const RETRY_CLASSES_BY_CODE: ReadonlyMap<Code, readonly Retry[]> = new Map<Code, readonly Retry[]>([
  [Code.Unavailable, ["transient"]],
  [Code.ResourceExhausted, ["later"]],
  [Code.DeadlineExceeded, ["transient"]],
  [Code.Aborted, ["later", "check-status", "final"]],
  [Code.AlreadyExists, ["check-status", "final"]],
  [Code.FailedPrecondition, ["later", "final"]],
]);

/** Codes whose HTTP status (503, 429) generic retry middleware repeats: they always carry a retry hint. */
const HINTED_CODES: ReadonlySet<Code> = new Set([Code.Unavailable, Code.ResourceExhausted]);

/** True when refusals with this code always carry RetryInfo and Retry-After (and grpc-retry-pushback-ms). */
export function sendsRetryHint(code: Code): boolean {
  return HINTED_CODES.has(code);
}

/** The hint a 429/503 refusal carries when its throw site named none. */
export const DEFAULT_RETRY_HINT_MS = 1000;

/** Reasons whose code the SPEC fixes outside rule C1, with where it says so. */
export const SPEC_CODE_EXCEPTIONS: ReadonlyMap<string, string> = new Map([
  ["IDEMPOTENCY_CONFLICT", "SPEC, Payouts API: same key while the first is in progress -> aborted (409)"],
]);

/** The retry classes a code may travel with. */
export function retryClassesFor(code: Code): readonly Retry[] {
  return RETRY_CLASSES_BY_CODE.get(code) ?? ["final"];
}

/** One entry that breaks the rule, and why. */
export interface CodeRuleViolation {
  readonly id: string;
  readonly problem: string;
}

/** Every entry of `entries` whose (code, retry class) pair breaks rule C1; empty when the catalogue keeps it. */
export function codeRuleViolations(entries: readonly { readonly id: string; readonly code: Code; readonly retry: Retry }[]): CodeRuleViolation[] {
  const out: CodeRuleViolation[] = [];
  for (const e of entries) {
    const allowed = retryClassesFor(e.code);
    if (allowed.includes(e.retry)) continue;
    if (SPEC_CODE_EXCEPTIONS.has(e.id) && e.code === Code.Aborted) continue;
    const status = sendsRetryHint(e.code) ? " (an HTTP status generic retry middleware repeats)" : "";
    out.push({ id: e.id, problem: `retry class ${e.retry} travels with ${Code[e.code]}${status}; that code allows ${allowed.join(", ")}` });
  }
  return out;
}
