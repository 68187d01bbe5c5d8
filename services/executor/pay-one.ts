/**
 * UC-05 for one payout: acquire the account lock -> token -> fence the payout row -> renew ->
 * SubmitPayout(token) -> record the outcome on the row fenced by the same token -> release.
 *
 * The executor is untrusted by design (INV-07): it never asks "am I still the holder?" to
 * decide whether submitting is safe. The paydb fence and the proxy's high-water mark decide;
 * the executor only obeys their answers. Rules:
 *   - FENCED_OUT (paydb 0 rows, or the proxy): stop; someone newer owns the payout/account.
 *   - DUPLICATE_SUBMISSION: GetSubmission and record what it says.
 *   - RAIL_AMBIGUOUS: payout UNKNOWN; never resubmit (the reconciler closes it, UC-07).
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
import { verdictFor } from "./submission-outcome.js";
import { annotate } from "../shared/tracing.js";
import { accountLockKey } from "../shared/token-signature.js";
import { submissionRef, type SubmissionReferenceMode } from "../shared/submission-ref.js";

export type PayOutcome = "PAID" | "FAILED" | "UNKNOWN" | "FENCED_OUT" | "DEFERRED" | "ABANDONED";

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

/** Lookup result of GetSubmission: a row, "never admitted", or "could not ask". */
type Lookup = { kind: "found"; submission: Submission } | { kind: "not_found" } | { kind: "error"; error: unknown };

export function createPayOne(deps: PayOneDeps) {
  const { store, lock, proxies, metrics, logger, executorId } = deps;
  // Long enough for the lease plus one proxy call; a claim is only a hint, the fence guards.
  const fencedClaimMs = deps.leaseTtlMs + deps.callTimeoutMs;

  /** GetSubmission is a read: asking again (on another replica) is always safe. */
  async function lookup(payoutId: string, headers: Record<string, string>): Promise<Lookup> {
    let last: unknown;
    for (let attempt = 0; attempt < Math.max(3, proxies.size); attempt++) {
      try {
        const res = await proxies.next().getSubmission({ payoutId }, { timeoutMs: deps.callTimeoutMs, headers });
        if (res.submission) return { kind: "found", submission: res.submission };
        return { kind: "error", error: new Error("GetSubmission answered without a submission") };
      } catch (err) {
        const ce = ConnectError.from(err);
        if (ce.code === Code.NotFound) return { kind: "not_found" };
        last = err;
        await sleep(jitter(Math.min(1000, deps.pollIntervalMs * 2 ** attempt)));
      }
    }
    return { kind: "error", error: last };
  }

  /** paydb writes are fenced, so retrying one is safe; a transient outage should not cost a payout. */
  async function recordOutcome(payoutId: string, token: bigint, write: OutcomeWrite) {
    try {
      return { written: await retryWhileUnavailable(() => store.recordOutcome(payoutId, token, write)) };
    } catch (err) {
      return { failed: err };
    }
  }

  return async function payOne(p: ClaimedPayout, signal: AbortSignal): Promise<PayOutcome> {
    const started = performance.now();
    const headers: Record<string, string> = p.traceparent ? { traceparent: p.traceparent } : {};
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

    if (signal.aborted) return defer(p.fence, 0, "shutting down", "ABANDONED");

    // 1. The account lock and its token.
    let lease: Lease | undefined;
    const lockStarted = performance.now();
    try {
      const res = await lock.acquire(
        { key, owner: executorId, ttlMs: deps.leaseTtlMs, waitMs: deps.lockWaitMs },
        { timeoutMs: deps.lockWaitMs + deps.callTimeoutMs, signal, headers },
      );
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
    // What the proxy and the rail see as this attempt's payout id (see shared/submission-ref.ts).
    const ref = submissionRef(p.payoutId, token, deps.submissionReference);
    annotate({ "railfence.fencing_token": token.toString() });

    try {
      // 2. C1 §1.6: fence the payout row. 0 rows = someone newer owns it (or it is finished).
      let fenced;
      try {
        fenced = await store.fence(p.payoutId, token, executorId, fencedClaimMs, ref);
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
        await lock.renew({ key, leaseId, ttlMs: deps.leaseTtlMs }, { timeoutMs: deps.callTimeoutMs, headers });
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

      // A payout fenced before may already have been submitted by an earlier holder: ask first,
      // so an honest takeover never trips the DUPLICATE_SUBMISSION alarm.
      if (fenced.previousFence > 0n) {
        const found = await lookup(submissionRef(p.payoutId, fenced.previousFence, deps.submissionReference), headers);
        if (found.kind === "found") return await settle(found.submission, token);
        if (found.kind === "error") return await defer(token, jitter(1000), "GetSubmission failed");
      }

      // 4. Submit once. Not tied to the drain signal: once sent, we want the answer.
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
          { timeoutMs: deps.callTimeoutMs, headers },
        );
        submission = res.submission;
        step("submit");
      } catch (err) {
        step("submit");
        return await onSubmitError(err, token);
      }
      if (!submission) return await afterLostAnswer(token, "SubmitPayout answered without a submission");
      return await settle(submission, token);
    } finally {
      await lock.release({ key, leaseId }, { timeoutMs: deps.callTimeoutMs, headers }).catch(() => {
        // Best effort: an unreleased lease expires by itself after its TTL.
      });
    }

    async function onSubmitError(err: unknown, token: bigint): Promise<PayOutcome> {
      const ce = ConnectError.from(err);
      const reason = errorReason(ce);
      if (ce.code === Code.Aborted && reason === "FENCED_OUT") {
        metrics.fencedOut.inc({ where: "proxy" });
        // The account moved on to a newer token; this payout still needs paying, later.
        await store.deferClaim(p.payoutId, executorId, token, jitter(deps.pollIntervalMs)).catch(() => {});
        return log("FENCED_OUT", { fencing_token: token.toString(), where: "proxy" });
      }
      if (ce.code === Code.AlreadyExists && reason === "DUPLICATE_SUBMISSION") {
        const found = await lookup(ref, headers);
        if (found.kind === "found") return settle(found.submission, token);
        return defer(token, jitter(1000), "duplicate, and GetSubmission failed");
      }
      if (ce.code === Code.Aborted && reason === "RAIL_AMBIGUOUS") {
        return record(token, { state: "UNKNOWN", failureReason: "RAIL_AMBIGUOUS" });
      }
      if (ce.code === Code.InvalidArgument && errorInfo(ce)) {
        // Step 0 refused the request: nothing was recorded or forwarded, and the same data
        // would be refused again. The payout cannot be paid as it stands.
        const field = errorInfo(ce)?.metadata.field;
        return record(token, { state: "FAILED", failureReason: `INVALID_PAYOUT:${reason}${field ? `:${field}` : ""}` });
      }
      return afterLostAnswer(token, `${Code[ce.code]}${reason ? ` ${reason}` : ""}`);
    }

    /** C3 §3.8: after a lost answer, ask; never resubmit. */
    async function afterLostAnswer(token: bigint, what: string): Promise<PayOutcome> {
      logger.warn({ event: "submit_answer_lost", payout_id: p.payoutId, fencing_token: token.toString(), error: what }, "SubmitPayout answer lost; asking GetSubmission");
      const deadline = performance.now() + deps.callTimeoutMs;
      for (;;) {
        const found = await lookup(ref, headers);
        if (found.kind === "not_found") return defer(token, jitter(deps.pollIntervalMs), "intent never committed; rail not called");
        if (found.kind === "error") return defer(token, jitter(1000), "GetSubmission failed after a lost answer");
        const v = verdictFor(found.submission);
        if (v.kind === "record") return record(token, v.write);
        // The proxy is still waiting for the rail: give it time, then leave it to a later attempt
        // (which starts with GetSubmission, never with a submit).
        if (performance.now() > deadline) return defer(token, jitter(deps.callTimeoutMs), "proxy still forwarding");
        await sleep(jitter(deps.pollIntervalMs));
      }
    }

    async function settle(s: Submission, token: bigint): Promise<PayOutcome> {
      const v = verdictFor(s);
      if (v.kind === "record") return record(token, v.write);
      return afterLostAnswer(token, "submission still forwarding");
    }

    async function record(token: bigint, write: OutcomeWrite): Promise<PayOutcome> {
      const res = await recordOutcome(p.payoutId, token, write);
      if ("failed" in res) {
        // The proxy's ledger holds the truth; the next attempt reads it with GetSubmission.
        return log("DEFERRED", { why: "outcome not recorded (paydb)", fencing_token: token.toString() });
      }
      step("record");
      if (!res.written) {
        metrics.fencedOut.inc({ where: "paydb" });
        return log("FENCED_OUT", { fencing_token: token.toString(), where: "paydb", at: "outcome" });
      }
      metrics.endToEnd.observe({ state: write.state }, res.written.ageSeconds);
      return log(write.state, { fencing_token: token.toString(), rail_reference: write.railReference ?? undefined, failure_reason: write.failureReason ?? undefined });
    }
  };
}
