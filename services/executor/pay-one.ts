/**
 * UC-05 for one payout: acquire the account lock -> token -> fence the payout row -> renew ->
 * settle an earlier submission, or SubmitPayout(token) -> record the outcome on the row fenced by
 * the same token -> release.
 *
 * The executor is untrusted by design (INV-07): it never asks "am I still the holder?" to
 * decide whether submitting is safe. The paydb fence and the proxy (mark, payout binding, one
 * live submission per payout) decide; the executor only obeys their answers. Rules:
 *   - a payout fenced before may have been submitted by an earlier holder: ask the proxy for the
 *     payout's submissions (by payout, never by a guessed reference) and settle a live one;
 *   - FENCED_OUT (paydb 0 rows, or the proxy): stop; someone newer owns the payout/account. If
 *     the lease is still ours, the account's mark is ahead of anything the lock issues: a human's;
 *   - DUPLICATE_SUBMISSION / PAYOUT_ALREADY_SUBMITTED: settle the submission the proxy names;
 *   - RAIL_AMBIGUOUS: payout UNKNOWN; never resubmit (the reconciler closes it, UC-07);
 *   - NOT_FORWARDED: the rail was not called; a later attempt submits again;
 *   - refusals no retry can cure (permission, signature, binding): NEEDS_ATTENTION with the reason;
 *   - lost answer (network error, deadline, UNAVAILABLE, ...): GetSubmission before anything
 *     else. NOT_FOUND means the intent never committed, so the rail was never called: leave
 *     the payout for a later attempt. Never blind-resubmit (C3 §3.8).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { errorInfo, errorReason } from "../shared/errors.js";
import type { Logger } from "../shared/logger.js";
import { retryWhileUnavailable } from "../shared/pg.js";
import type { Lease } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import type { Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import type { LockClient, ProxyPool } from "./clients.js";
import type { ExecutorMetrics } from "./executor-metrics.js";
import type { ClaimedPayout, OutcomeWrite, PayoutStore } from "./payout-store.js";
import { priorFor, verdictFor } from "./submission-outcome.js";
import { annotate } from "../shared/tracing.js";
import { accountLockKey } from "../shared/token-signature.js";
import { submissionRef, type SubmissionReferenceMode } from "../shared/submission-ref.js";

export type PayOutcome = "PAID" | "FAILED" | "UNKNOWN" | "NEEDS_ATTENTION" | "FENCED_OUT" | "DEFERRED" | "ABANDONED";

export interface PayOneDeps {
  store: PayoutStore;
  lock: LockClient;
  proxies: ProxyPool;
  metrics: ExecutorMetrics;
  logger: Logger;
  executorId: string;
  leaseTtlMs: number;
  lockWaitMs: number;
  callTimeoutMs: number;
  pauseAfterFenceMs: number;
  pollIntervalMs: number;
  submissionReference: SubmissionReferenceMode;
}

/** Resolves after ms, or rejects early when signal aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Spreads retries of contended payouts so executors do not collide in lock-step. */
const jitter = (ms: number) => Math.round(ms * (0.5 + Math.random()));

/** Refusals of SubmitPayout that no retry can cure: the payout needs a human. */
const NEEDS_HUMAN = new Set(["PAYOUT_NOT_FOUND", "PAYOUT_MISMATCH", "TOKEN_SIGNATURE_INVALID", "PERMISSION_DENIED", "UNAUTHENTICATED"]);

/** A read through the proxy: a row, "never admitted", or "could not ask". */
type Lookup<T> = { kind: "found"; value: T } | { kind: "not_found" } | { kind: "error"; error: unknown };

export function createPayOne(deps: PayOneDeps) {
  const { store, lock, proxies, metrics, logger, executorId } = deps;
  // Long enough for the lease plus one proxy call; a claim is only a hint, the fence guards.
  const fencedClaimMs = deps.leaseTtlMs + deps.callTimeoutMs;

  /** Reads are safe to ask again (on another replica). */
  async function read<T>(call: (c: ReturnType<ProxyPool["next"]>) => Promise<T | undefined>): Promise<Lookup<T>> {
    let last: unknown;
    for (let attempt = 0; attempt < Math.max(3, proxies.size); attempt++) {
      try {
        const value = await call(proxies.next());
        if (value !== undefined) return { kind: "found", value };
        return { kind: "error", error: new Error("rail-proxy answered without a value") };
      } catch (err) {
        if (ConnectError.from(err).code === Code.NotFound) return { kind: "not_found" };
        last = err;
        await sleep(jitter(Math.min(1000, deps.pollIntervalMs * 2 ** attempt)));
      }
    }
    return { kind: "error", error: last };
  }

  return async function payOne(p: ClaimedPayout, signal: AbortSignal): Promise<PayOutcome> {
    const started = performance.now();
    const headers: Record<string, string> = p.traceparent ? { traceparent: p.traceparent } : {};
    const call = () => ({ timeoutMs: deps.callTimeoutMs, headers });
    const key = accountLockKey(p.accountId);
    // Where the time went, per step (ms), for the attempt's log line.
    const steps: Record<string, number> = {};
    let stepStarted = started;
    const step = (name: string) => {
      const t = performance.now();
      steps[name] = Math.round((t - stepStarted) * 10) / 10;
      stepStarted = t;
    };
    const log = (outcome: PayOutcome, extra: Record<string, unknown> = {}) => {
      metrics.payouts.inc({ outcome });
      logger.info(
        { event: "payout_attempt", payout_id: p.payoutId, account_id: p.accountId, outcome, duration_ms: Math.round(performance.now() - started), steps_ms: steps, ...extra },
        `payout ${outcome}`,
      );
      return outcome;
    };
    /** Leave the payout for a later attempt (by anyone) after retryAfterMs. */
    const defer = async (fenceAtMost: bigint, retryAfterMs: number, why: string, outcome: PayOutcome = "DEFERRED") => {
      await store.deferClaim(p.payoutId, executorId, fenceAtMost, retryAfterMs).catch(() => {
        // paydb down: the claim simply lapses on its own.
      });
      return log(outcome, { why });
    };
    const lookup = (reference: string) => read((c) => c.getSubmission({ payoutId: reference }, call()).then((r) => r.submission));

    if (signal.aborted) return defer(p.fence, 0, "shutting down", "ABANDONED");

    // 1. The account lock and its token.
    let lease: Lease | undefined;
    const lockStarted = performance.now();
    try {
      const res = await lock.acquire({ key, owner: executorId, ttlMs: deps.leaseTtlMs, waitMs: deps.lockWaitMs }, { timeoutMs: deps.lockWaitMs + deps.callTimeoutMs, signal, headers });
      lease = res.lease;
      step("acquire");
      metrics.lockAcquire.observe({ result: "GRANTED" }, (performance.now() - lockStarted) / 1000);
    } catch (err) {
      const reason = errorReason(err);
      metrics.lockAcquire.observe({ result: reason === "LOCK_HELD" ? "LOCK_HELD" : "ERROR" }, (performance.now() - lockStarted) / 1000);
      if (signal.aborted) return defer(p.fence, 0, "shutting down", "ABANDONED");
      // A lost Acquire answer may have granted a lease we never saw: it expires on its own.
      return defer(p.fence, reason === "LOCK_HELD" ? jitter(deps.pollIntervalMs) : jitter(1000), reason || `lock ${Code[ConnectError.from(err).code]}`);
    }
    if (!lease || lease.fencingToken <= 0n) return defer(p.fence, jitter(1000), "lock answered without a token");
    const token = lease.fencingToken;
    const leaseId = lease.leaseId;
    annotate({ "railfence.fencing_token": token.toString() });
    const stillHolder = () =>
      lock.renew({ key, leaseId, ttlMs: deps.leaseTtlMs }, call()).then(
        () => true,
        () => false,
      );

    try {
      // 2. C1 §1.6: fence the payout row. 0 rows = someone newer owns it (or it is finished).
      let fenced;
      try {
        fenced = await store.fence(p.payoutId, token, executorId, fencedClaimMs);
      } catch (err) {
        return await defer(p.fence, jitter(1000), `paydb: ${(err as Error).message}`);
      }
      step("fence");
      if (!fenced) {
        metrics.fencedOut.inc({ where: "paydb" });
        return log("FENCED_OUT", { fencing_token: token.toString(), where: "paydb" });
      }

      // 3. Extend the lease to cover the submission. If it is already gone, stop before
      // submitting: not as a guard (the fences guard), but to avoid work that would be refused.
      try {
        await lock.renew({ key, leaseId, ttlMs: deps.leaseTtlMs }, call());
      } catch (err) {
        return await defer(token, jitter(deps.pollIntervalMs), `renew: ${errorReason(err) || Code[ConnectError.from(err).code]}`);
      }
      step("renew");
      logger.info({ event: "fenced", payout_id: p.payoutId, account_id: p.accountId, fencing_token: token.toString() }, "payout fenced");

      // Test/drill pause point: the stale-holder window, right before the irreversible call.
      if (deps.pauseAfterFenceMs > 0) {
        try {
          await sleep(deps.pauseAfterFenceMs, signal);
        } catch {
          return await defer(token, 0, "shutting down", "ABANDONED");
        }
      }
      if (signal.aborted) return await defer(token, 0, "shutting down", "ABANDONED");

      // 4. An earlier holder may already have submitted this payout, under any reference: ask the
      // proxy for the payout's submissions. (A payout never fenced before has none: the proxy
      // admits a submission only for a payout fenced with its token.) A failed read moves nothing.
      let plainIdTaken = false;
      if (fenced.previousFence > 0n) {
        const found = await read((c) => c.listPayoutSubmissions({ payoutId: p.payoutId }, call()).then((r) => r.submissions));
        if (found.kind !== "found") return await defer(token, jitter(1000), "ListPayoutSubmissions failed");
        step("prior");
        const prior = priorFor(p.payoutId, found.value);
        if (prior.kind === "settle") return await settle(prior.submission, token);
        plainIdTaken = prior.plainIdTaken;
      }

      // 5. Submit once. Not tied to the drain signal: once sent, we want the answer.
      const ref = submissionRef(p.payoutId, token, deps.submissionReference, plainIdTaken);
      let submission: Submission | undefined;
      try {
        const res = await proxies.next().submitPayout(
          {
            accountId: p.accountId,
            payoutId: ref,
            fencingToken: token,
            // Passed through untouched: the proxy, not the executor, decides what it is worth.
            fencingTokenSignature: lease.tokenSignature,
            amount: { amountMinor: p.amountMinor, currency: p.currency },
            beneficiary: p.beneficiary,
          },
          call(),
        );
        submission = res.submission;
        step("submit");
      } catch (err) {
        step("submit");
        return await onSubmitError(err, ref, token);
      }
      if (!submission) return await afterLostAnswer(ref, token, "SubmitPayout answered without a submission");
      return await settle(submission, token);
    } finally {
      await lock.release({ key, leaseId }, call()).catch(() => {
        // Best effort: an unreleased lease expires by itself after its TTL.
      });
    }

    async function onSubmitError(err: unknown, ref: string, token: bigint): Promise<PayOutcome> {
      const ce = ConnectError.from(err);
      const reason = errorReason(ce);
      const meta = errorInfo(ce)?.metadata ?? {};
      if (ce.code === Code.Aborted && reason === "FENCED_OUT") {
        // Someone newer took the account. Unless the lease is still ours: then the mark is ahead
        // of anything the lock issues (forged, or a backend switch without a token floor), and
        // every attempt would be fenced out for ever.
        if (await stillHolder()) return needsHuman(token, ref, "MARK_AHEAD_OF_LOCK", `FENCED_OUT at token ${token} while still holding the account's lease`);
        metrics.fencedOut.inc({ where: "proxy" });
        // The account moved on to a newer token; this payout still needs paying, later.
        await store.deferClaim(p.payoutId, executorId, token, jitter(deps.pollIntervalMs)).catch(() => {});
        return log("FENCED_OUT", { fencing_token: token.toString(), where: "proxy" });
      }
      if (ce.code === Code.FailedPrecondition && reason === "PAYOUT_FENCE_MISMATCH" && meta.holder === "NEWER") {
        metrics.fencedOut.inc({ where: "proxy" });
        return log("FENCED_OUT", { fencing_token: token.toString(), where: "proxy", reason });
      }
      if (ce.code === Code.FailedPrecondition && reason === "PAYOUT_NOT_PAYABLE") {
        // Closed meanwhile by someone else (the reconciler, a human): nothing left to do here.
        return log("ABANDONED", { why: `payout is ${meta.state ?? "no longer payable"}`, fencing_token: token.toString() });
      }
      if (ce.code === Code.AlreadyExists && (reason === "DUPLICATE_SUBMISSION" || reason === "PAYOUT_ALREADY_SUBMITTED")) {
        const found = await lookup(reason === "PAYOUT_ALREADY_SUBMITTED" && meta.live_submission ? meta.live_submission : ref);
        if (found.kind === "found") return settle(found.value, token);
        return defer(token, jitter(1000), `${reason}, and GetSubmission failed`);
      }
      if (ce.code === Code.Aborted && reason === "RAIL_AMBIGUOUS") {
        return record(token, { state: "UNKNOWN", failureReason: "RAIL_AMBIGUOUS", submissionRef: ref });
      }
      if (ce.code === Code.Aborted && reason === "NOT_FORWARDED") {
        // The rail was not called; the next attempt submits again, under a fresh reference.
        return defer(token, jitter(deps.pollIntervalMs), "not forwarded (rail not called)");
      }
      if (NEEDS_HUMAN.has(reason) || ce.code === Code.PermissionDenied || ce.code === Code.Unauthenticated || (ce.code === Code.FailedPrecondition && reason === "PAYOUT_FENCE_MISMATCH")) {
        return needsHuman(token, ref, reason || Code[ce.code].toUpperCase(), `SubmitPayout refused: ${Code[ce.code]} ${reason}${meta.field ? ` (${meta.field})` : ""}`);
      }
      if (ce.code === Code.InvalidArgument && errorInfo(ce)) {
        // Step 0 refused the request: nothing was recorded or forwarded, and the same data
        // would be refused again. The payout cannot be paid as it stands.
        return record(token, { state: "FAILED", failureReason: `INVALID_PAYOUT:${reason}${meta.field ? `:${meta.field}` : ""}` });
      }
      return afterLostAnswer(ref, token, `${Code[ce.code]}${reason ? ` ${reason}` : ""}`);
    }

    /** A refusal no retry can cure: the payout waits for a human, counted and alerted. */
    function needsHuman(token: bigint, ref: string, reason: string, detail: string): Promise<PayOutcome> {
      metrics.needsAttention.inc({ reason });
      logger.error({ event: "needs_attention", payout_id: p.payoutId, reason, detail, fencing_token: token.toString() }, "payout needs a human");
      return record(token, { state: "NEEDS_ATTENTION", attentionReason: reason, attentionDetail: detail, submissionRef: ref });
    }

    /** C3 §3.8: after a lost answer, ask about that very submission; never resubmit. */
    async function afterLostAnswer(ref: string, token: bigint, what: string): Promise<PayOutcome> {
      logger.warn({ event: "submit_answer_lost", payout_id: p.payoutId, reference: ref, fencing_token: token.toString(), error: what }, "answer lost; asking GetSubmission");
      const deadline = performance.now() + deps.callTimeoutMs;
      for (;;) {
        const found = await lookup(ref);
        if (found.kind === "not_found") return defer(token, jitter(deps.pollIntervalMs), "intent never committed; rail not called");
        if (found.kind === "error") return defer(token, jitter(1000), "GetSubmission failed after a lost answer");
        const v = verdictFor(found.value);
        if (v.kind === "record") return record(token, { ...v.write, submissionRef: ref });
        // The proxy is still waiting for the rail: give it time, then leave it to a later attempt
        // (which starts from the payout's submissions, never with a submit).
        if (performance.now() > deadline) return defer(token, jitter(deps.callTimeoutMs), "proxy still forwarding");
        await sleep(jitter(deps.pollIntervalMs));
      }
    }

    async function settle(s: Submission, token: bigint): Promise<PayOutcome> {
      const v = verdictFor(s);
      if (v.kind === "record") {
        if (v.write.state === "NEEDS_ATTENTION") metrics.needsAttention.inc({ reason: v.write.attentionReason ?? "UNSPECIFIED" });
        return record(token, { ...v.write, submissionRef: s.payoutId });
      }
      return afterLostAnswer(s.payoutId, token, "submission still forwarding");
    }

    async function record(token: bigint, write: OutcomeWrite): Promise<PayOutcome> {
      let written;
      try {
        // paydb writes are fenced, so retrying one is safe; a transient outage should not cost a payout.
        written = await retryWhileUnavailable(() => store.recordOutcome(p.payoutId, token, write));
      } catch {
        // The proxy's ledger holds the truth; the next attempt reads it.
        return log("DEFERRED", { why: "outcome not recorded (paydb)", fencing_token: token.toString() });
      }
      step("record");
      if (!written) {
        metrics.fencedOut.inc({ where: "paydb" });
        return log("FENCED_OUT", { fencing_token: token.toString(), where: "paydb", at: "outcome" });
      }
      metrics.endToEnd.observe({ state: write.state }, written.ageSeconds);
      return log(write.state, {
        fencing_token: token.toString(),
        rail_reference: write.railReference ?? undefined,
        failure_reason: write.failureReason ?? undefined,
        attention_reason: write.attentionReason,
      });
    }
  };
}
