/**
 * UC-05 for one payout, step by step: acquire the account lock -> token -> fence the payout row ->
 * renew (only when the lease may be running short) -> settle an earlier submission, or
 * SubmitPayout(token) -> record the outcome on the row fenced by the same token -> release.
 *
 * The executor is untrusted by design (INV-07): it never asks "am I still the holder?" to decide
 * whether submitting is safe. The paydb fence and the proxy (mark, payout binding, one live
 * submission per payout) decide; the executor only obeys their answers (submit-refusal.ts has the
 * table). After a lost answer it asks, never resubmits (C3 §3.8): a submission that may have paid
 * is settled, never repeated (submission-outcome.ts).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { errorReason, hasReason, REASONS } from "../shared/domain/errors.js";
import type { Logger } from "../shared/process/logger.js";
import { provedNotSent } from "../shared/rpc/grpc-unary-client.js";
import type { Lease } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import { SubmissionState, type Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { annotate } from "../shared/observability/tracing.js";
import { accountLockKey } from "../shared/process/token-signature.js";
import { submissionRef, type SubmissionReferenceMode } from "../shared/domain/submission-ref.js";
import { startAttempt, type Attempt, type PayOutcome } from "./attempt.js";
import type { LockClient, ProxyPool } from "./clients.js";
import type { ExecutorMetrics } from "./executor-metrics.js";
import type { ClaimedPayout, PayoutStore } from "./payout-store.js";
import { createProxyReads } from "./proxy-reads.js";
import { refusalAction } from "./submit-refusal.js";
import { priorFor, verdictFor } from "./submission-outcome.js";
import { bookedAt, forgottenIntentVerdict } from "./forgotten-intent.js";
import { jitter, renewDue, sleep } from "./timing.js";

export type { PayOutcome };
export type PayOne = (p: ClaimedPayout, signal: AbortSignal) => Promise<PayOutcome>;

/**
 * payOne; payNext, the way in from a notification that names an account (decision 075); and the
 * releases both have sent and not yet heard answered (a closing executor waits for them).
 */
export interface PayOneWithReleases extends PayOne {
  payNext(accountId: string, signal: AbortSignal): Promise<PayOutcome | "nothing" | "claim">;
  releasesSettled(): Promise<void>;
}

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
  /** How long "absent from the statement" takes to mean "not paid" (forgotten-intent.ts). */
  settlementWindowMs: number;
  clockSkewAllowanceMs: number;
  /** Harness only, a negative control: NOT_FOUND after a lost answer means "never sent". */
  trustNotFound?: boolean;
  /** Harness only, a negative control: every ACCEPTED answer means "the proxy closed the payout". */
  trustAccepted?: boolean;
  /** Runs an attempt payNext found in that payout's trace (payOne's caller does the same for claims). */
  traced: <T>(p: ClaimedPayout, fn: () => Promise<T>) => Promise<T>;
}

export function createPayOne(deps: PayOneDeps): PayOneWithReleases {
  const { store, lock, proxies, metrics, logger, executorId } = deps;
  // Releases in flight. The attempt does not wait for its release: the lock service may hold it
  // for a few milliseconds to share the next acquire's commit (decision 074), and the slot is
  // free for the next payout meanwhile. Nothing waits on a release but a closing executor.
  const releasing = new Set<Promise<void>>();
  const reads = createProxyReads(proxies, deps);
  // Long enough for the lease plus one proxy call; a claim is only a hint, the fence guards.
  const fencedClaimMs = deps.leaseTtlMs + deps.callTimeoutMs;

  async function payOne(p: ClaimedPayout, signal: AbortSignal): Promise<PayOutcome> {
    const a = startAttempt(deps, p);
    const key = accountLockKey(p.accountId);
    if (signal.aborted) return a.defer(p.fence, 0, "shutting down", "ABANDONED");

    // 1. The account lock and its token. The lease's TTL runs from its grant, which is after this.
    const acquireSent = performance.now();
    const lease = await acquire(a, key, p.fence, signal);
    if (typeof lease === "string") return lease;
    const token = lease.fencingToken;
    annotate({ "railfence.fencing_token": token.toString() });
    try {
      // [rule:executor-fence]
      // 2. C1 §1.6: fence the payout row. 0 rows = someone newer owns it (or it is finished).
      let fenced;
      try {
        fenced = await store.fence(p.payoutId, token, lease.tokenSignature, executorId, fencedClaimMs);
      } catch (err) {
        return await a.defer(p.fence, jitter(1000), `paydb: ${(err as Error).message}`);
      }
      a.step("fence");
      if (!fenced) {
        metrics.fencedOut.inc({ where: "paydb" });
        // A fence above every token the lock ever issued for the account was never issued to
        // anyone (forged, or the lock went backwards): flagged, or it is parked for ever.
        const ahead = await fenceAheadOfLock(p.payoutId, key, token).catch(() => undefined);
        if (ahead !== undefined) {
          metrics.needsAttention.inc({ reason: "fence_ahead_of_lock" });
          return a.log("NEEDS_ATTENTION", { fencing_token: token.toString(), where: "paydb", why: "FENCE_AHEAD_OF_LOCK", fence: ahead.toString() });
        }
        return a.log("FENCED_OUT", { fencing_token: token.toString(), where: "paydb" });
      }
      // [/rule:executor-fence]
      return await afterFence(a, p, lease, fenced.previousFence, acquireSent, signal);
    } finally {
      releaseLater(key, lease, a.headers);
    }
  }

  /** Steps 3-5 on a payout fenced with the lease's token: submit once, or settle what was submitted. */
  async function afterFence(a: Attempt, p: ClaimedPayout, lease: Lease, previousFence: bigint, acquireSent: number, signal: AbortSignal): Promise<PayOutcome> {
    const call = () => ({ timeoutMs: deps.callTimeoutMs, headers: a.headers });
    const key = lease.key;
    const token = lease.fencingToken;
    // 3. When the lease may be running short (a long lock wait, a slow fence), extend it; if it
    // is already gone, stop before submitting. Not a guard (the fences guard): it only avoids
    // work that would be refused. On the fast path the lease is still fresh, and a renewal
    // would buy milliseconds of lease for a lock RPC and a lockdb commit (timing.ts).
    if (renewDue(performance.now() - acquireSent, deps.leaseTtlMs)) {
      try {
        await lock.renew({ key, leaseId: lease.leaseId, ttlMs: deps.leaseTtlMs }, call());
      } catch (err) {
        return await a.defer(token, jitter(deps.pollIntervalMs), `renew: ${errorReason(err) || Code[ConnectError.from(err).code]}`);
      }
      a.step("renew");
    }
    logger.info({ event: "fenced", payout_id: p.payoutId, account_id: p.accountId, fencing_token: token.toString() }, "payout fenced");

    // Test/drill pause point: the stale-holder window, right before the irreversible call.
    if (deps.pauseAfterFenceMs > 0) await sleep(deps.pauseAfterFenceMs, signal).catch(() => {});
    if (signal.aborted) return await a.defer(token, 0, "shutting down", "ABANDONED");

    // [rule:executor-lookup]
    // 4. An earlier holder may already have submitted this payout, under any reference: ask the
    // proxy for the payout's submissions. (A payout never fenced before has none: the proxy
    // admits a submission only for a payout fenced with its token.) A failed read moves nothing.
    let plainIdTaken = false;
    if (previousFence > 0n) {
      const found = await reads.payoutSubmissions(p.payoutId, a.headers);
      if (found.kind !== "found") return await a.defer(token, jitter(1000), "ListPayoutSubmissions failed");
      a.step("prior");
      const prior = priorFor(p.payoutId, found.value);
      if (prior.kind === "settle") return await settle(a, prior.submission, token);
      plainIdTaken = prior.plainIdTaken;
      // A submission paydb forgot (its answer was lost, then NOT_FOUND): the rail decides.
      const lost = p.lostSubmission;
      if (lost && found.value.some((s) => s.payoutId === lost.ref)) await store.clearLostSubmission(p.payoutId, token, lost.ref);
      else if (lost) {
        const decided = await afterForgottenIntent(a, p, lost, token);
        if (decided) return decided;
      }
    }

    // [/rule:executor-lookup]
    // [rule:executor-submit]
    // 5. Submit once. Not tied to the drain signal: once sent, we want the answer.
    const ref = submissionRef(p.payoutId, token, deps.submissionReference, plainIdTaken);
    let submission: Submission | undefined;
    let payoutClosed = false;
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
      payoutClosed = res.payoutClosed;
      a.step("submit");
    } catch (err) {
      a.step("submit");
      return await afterRefusal(a, err, ref, token, lease);
    }
    if (!submission) return await afterLostAnswer(a, ref, token, "SubmitPayout answered without a submission");
    // [rule:executor-closed]
    // The statement that recorded the rail's ACCEPTED closed the payout PAID (decision 072):
    // nothing is left to write. Any other answer (or a proxy that does not close payouts) is
    // recorded here, as before.
    if ((payoutClosed || deps.trustAccepted) && submission.state === SubmissionState.ACCEPTED) return a.closedByProxy(token, submission.railReference);
    // [/rule:executor-closed]
    return await settle(a, submission, token);
    // [/rule:executor-submit]
  }

  /** Sends the lease's release and does not wait for it (decision 074): the slot is free meanwhile. */
  function releaseLater(key: string, lease: Lease, headers: Record<string, string>): void {
    const released: Promise<void> = lock.release({ key, leaseId: lease.leaseId }, { timeoutMs: deps.callTimeoutMs, headers }).then(
      () => undefined,
      () => {
        // Best effort: an unreleased lease expires by itself after its TTL.
      },
    );
    releasing.add(released);
    void released.finally(() => releasing.delete(released));
  }

  // [rule:executor-fence-next]
  /**
   * Decision 075: told that an account has a payable payout, take the account's lock first, then
   * claim and fence its oldest payable payout in one statement (FENCE_NEXT: the fence rule of
   * step 2, per row). From there it is payOne's attempt (steps 3-5), in the payout's trace.
   * "nothing": no payout was left to take (another executor has it, or it is paid); "claim": this
   * way did not get as far as a payout (lock held or unreachable, paydb failing), and a claim
   * should look instead.
   */
  async function payNext(accountId: string, signal: AbortSignal): Promise<PayOutcome | "nothing" | "claim"> {
    if (signal.aborted) return "claim";
    const key = accountLockKey(accountId);
    const acquireSent = performance.now();
    let acquired = acquireSent;
    let lease: Lease | undefined;
    try {
      const res = await lock.acquire(
        { key, owner: executorId, ttlMs: deps.leaseTtlMs, waitMs: deps.lockWaitMs },
        { timeoutMs: deps.lockWaitMs + deps.callTimeoutMs, signal },
      );
      lease = res.lease;
      acquired = performance.now();
      metrics.lockAcquire.observe({ result: "granted" }, (acquired - acquireSent) / 1000);
    } catch (err) {
      metrics.lockAcquire.observe({ result: hasReason(err, REASONS.LOCK_HELD) ? "lock_held" : "error" }, (performance.now() - acquireSent) / 1000);
      return "claim";
    }
    if (!lease) return "claim";
    let taken: Awaited<ReturnType<PayoutStore["fenceNext"]>> | "failed" = "failed";
    if (lease.fencingToken > 0n)
      taken = await store.fenceNext(accountId, lease.fencingToken, lease.tokenSignature, executorId, fencedClaimMs).catch(() => "failed" as const);
    if (taken === "failed" || taken === undefined) {
      releaseLater(key, lease, {});
      if (taken === "failed") return "claim";
      metrics.fenceNext.inc({ found: "none" });
      return "nothing";
    }
    metrics.fenceNext.inc({ found: "payout" });
    const { payout, previousFence } = taken;
    const fencedLease = lease;
    // The payout's trace from here on (its Acquire came before the payout was known, so it is not
    // in it); the release is sent inside it, as payOne's is.
    return deps.traced(payout, async () => {
      // The attempt began with the Acquire: its steps read as payOne's do.
      const a = startAttempt(deps, payout, acquireSent);
      a.step("acquire", acquired);
      a.step("fence");
      annotate({ "railfence.fencing_token": fencedLease.fencingToken.toString(), "railfence.taken_by": "fence-next" });
      try {
        return await afterFence(a, payout, fencedLease, previousFence, acquireSent, signal);
      } finally {
        releaseLater(key, fencedLease, a.headers);
      }
    });
  }
  // [/rule:executor-fence-next]

  return Object.assign(payOne, {
    payNext,
    releasesSettled: async () => {
      await Promise.all([...releasing]);
    },
  });

  /** The account lease and its token, or the outcome when there is none to be had. */
  // [rule:executor-acquire]
  async function acquire(a: Attempt, key: string, fence: bigint, signal: AbortSignal): Promise<Lease | PayOutcome> {
    const lockStarted = performance.now();
    try {
      const res = await lock.acquire(
        { key, owner: executorId, ttlMs: deps.leaseTtlMs, waitMs: deps.lockWaitMs },
        { timeoutMs: deps.lockWaitMs + deps.callTimeoutMs, signal, headers: a.headers },
      );
      a.step("acquire");
      metrics.lockAcquire.observe({ result: "granted" }, (performance.now() - lockStarted) / 1000);
      if (!res.lease || res.lease.fencingToken <= 0n) return a.defer(fence, jitter(1000), "lock answered without a token");
      return res.lease;
    } catch (err) {
      const reason = errorReason(err);
      const held = hasReason(err, REASONS.LOCK_HELD);
      metrics.lockAcquire.observe({ result: held ? "lock_held" : "error" }, (performance.now() - lockStarted) / 1000);
      if (signal.aborted) return a.defer(fence, 0, "shutting down", "ABANDONED");
      // A lost Acquire answer may have granted a lease we never saw: it expires on its own.
      return a.defer(fence, held ? jitter(deps.pollIntervalMs) : jitter(1000), reason || `lock ${Code[ConnectError.from(err).code]}`);
    }
  }
  // [/rule:executor-acquire]

  /** SubmitPayout failed: what the refusal means (submit-refusal.ts), and doing it. */
  // [rule:executor-answers]
  async function afterRefusal(a: Attempt, err: unknown, ref: string, token: bigint, lease: Lease): Promise<PayOutcome> {
    const action = refusalAction(err, ref);
    switch (action.kind) {
      case "fenced-out": {
        // Someone newer took the account. Unless the lease is still ours: then the mark is ahead
        // of anything the lock issues (forged, or a backend switch without a token floor), and
        // every attempt would be fenced out for ever.
        const stillHolder = await lock
          .renew({ key: lease.key, leaseId: lease.leaseId, ttlMs: deps.leaseTtlMs }, { timeoutMs: deps.callTimeoutMs, headers: a.headers })
          .then(
            () => true,
            () => false,
          );
        if (stillHolder) return a.needsHuman(token, ref, "MARK_AHEAD_OF_LOCK", `FENCED_OUT at token ${token} while still holding the account's lease`);
        metrics.fencedOut.inc({ where: "proxy" });
        // The account moved on to a newer token; this payout still needs paying, later.
        await store.deferClaim(a.payoutId, executorId, token, jitter(deps.pollIntervalMs)).catch(() => {});
        return a.log("FENCED_OUT", { fencing_token: token.toString(), where: "proxy" });
      }
      case "newer-holder":
        metrics.fencedOut.inc({ where: "proxy" });
        return a.log("FENCED_OUT", { fencing_token: token.toString(), where: "proxy", reason: action.reason });
      case "closed":
        // Closed meanwhile by someone else (the reconciler, a human): nothing left to do here.
        return a.log("ABANDONED", { why: `payout is ${action.state}`, fencing_token: token.toString() });
      case "settle": {
        const found = await reads.submission(action.reference, a.headers);
        if (found.kind === "found") return settle(a, found.value, token);
        return a.defer(token, jitter(1000), `${action.reason}, and GetSubmission failed`);
      }
      case "unknown":
        return a.record(token, { state: "UNKNOWN", failureReason: "RAIL_AMBIGUOUS", submissionRef: ref });
      case "not-forwarded":
        // The rail was not called; the next attempt submits again, under a fresh reference.
        return a.defer(token, jitter(deps.pollIntervalMs), "not forwarded (rail not called)");
      case "needs-human":
        return a.needsHuman(token, ref, action.reason, action.detail);
      case "invalid":
        return a.record(token, { state: "FAILED", failureReason: action.failureReason });
      case "lost":
        return afterLostAnswer(a, ref, token, action.what, provedNotSent(err));
    }
  }
  // [/rule:executor-answers]

  /**
   * The payout's fence when it is above the highest token the lock ever issued for its account
   * (read after the fence: tokens only grow, so a fence above it then was never issued), flagged
   * NEEDS_ATTENTION. Anything at or below it is a holder's, newer or not: just fenced out.
   */
  async function fenceAheadOfLock(payoutId: string, key: string, token: bigint): Promise<bigint | undefined> {
    const fence = await store.payableFence(payoutId);
    if (fence === undefined || fence < token) return undefined;
    const { lastToken } = await lock.inspect({ key }, { timeoutMs: deps.callTimeoutMs });
    if (fence <= lastToken) return undefined;
    return (await store.flagFenceAhead(payoutId, fence, lastToken)) ? fence : undefined;
  }

  /** C3 §3.8: after a lost answer, ask about that very submission; never resubmit. */
  // [rule:executor-lost-answer]
  async function afterLostAnswer(a: Attempt, ref: string, token: bigint, what: string, neverSent = false): Promise<PayOutcome> {
    logger.warn(
      { event: "submit_answer_lost", payout_id: a.payoutId, reference: ref, fencing_token: token.toString(), error: what },
      "answer lost; asking GetSubmission",
    );
    const deadline = performance.now() + deps.callTimeoutMs;
    for (;;) {
      const found = await reads.submission(ref, a.headers);
      if (found.kind === "not_found") {
        // A call that never opened a stream wrote no byte of its request: nobody admitted it.
        if (deps.trustNotFound || neverSent) return a.defer(token, jitter(deps.pollIntervalMs), "intent never committed; rail not called");
        // Not "never sent": paydb may have forgotten a committed intent (decision 023). Recorded,
        // and the next attempt pays again only if the rail's statement shows nothing for it.
        try {
          await store.recordLostSubmission(a.payoutId, token, ref);
        } catch (err) {
          return a.defer(token, jitter(1000), `paydb: ${(err as Error).message}`);
        }
        logger.warn(
          { event: "submission_not_found_after_lost_answer", payout_id: a.payoutId, reference: ref, fencing_token: token.toString() },
          "paydb does not know a submission whose answer was lost: the rail's statement decides before any new submission",
        );
        return a.defer(token, jitter(deps.pollIntervalMs), "lost submission not found; the rail's statement decides");
      }
      if (found.kind === "error") return a.defer(token, jitter(1000), "GetSubmission failed after a lost answer");
      const v = verdictFor(found.value);
      if (v.kind === "record") return a.record(token, { ...v.write, submissionRef: ref });
      // The proxy is still waiting for the rail: give it time, then leave it to a later attempt
      // (which starts from the payout's submissions, never with a submit).
      if (performance.now() > deadline) return a.defer(token, jitter(deps.callTimeoutMs), "proxy still forwarding");
      await sleep(jitter(deps.pollIntervalMs));
    }
  }
  // [/rule:executor-lost-answer]

  /**
   * A lost submission paydb does not know: the rail's statement from shortly before it was lost
   * decides (forgotten-intent.ts). Returns the outcome, or undefined when the payout may be
   * submitted again (the statement, complete long enough after the loss, shows no payment).
   */
  async function afterForgottenIntent(a: Attempt, p: ClaimedPayout, lost: { ref: string; at: Date }, token: bigint): Promise<PayOutcome | undefined> {
    // From a little before the payout existed: every payment of it is at or after that.
    const since = new Date(Math.min(p.createdAt.getTime(), lost.at.getTime()) - 60_000 - deps.clockSkewAllowanceMs);
    const statement = await reads.railPaymentsOf(p.payoutId, since, a.headers);
    if (statement.kind !== "found") return a.defer(token, jitter(1000), "GetRailStatement failed for a forgotten submission");
    a.step("statement");
    const v = forgottenIntentVerdict(statement.value.payments, statement.value.coveredUntil, lost.at, deps);
    metrics.forgottenIntent.inc({ verdict: v.kind.toLowerCase() });
    const line = { event: "forgotten_submission", payout_id: p.payoutId, reference: lost.ref, lost_at: lost.at.toISOString(), verdict: v.kind };
    switch (v.kind) {
      case "paid":
        logger.error(
          { ...line, rail_reference: v.payment.railReference, client_reference: v.payment.clientReference, booked_at: bookedAt(v.payment) },
          "the rail paid a submission paydb no longer knows (a lost intent): the payout is PAID from the rail's statement, never paid again",
        );
        return a.record(token, { state: "PAID", railReference: v.payment.railReference, submissionRef: v.payment.clientReference });
      case "human":
        return a.needsHuman(token, lost.ref, "FORGOTTEN_SUBMISSION", v.detail);
      case "wait":
        logger.info({ ...line, until: v.until.toISOString() }, "waiting for the rail's statement to cover a forgotten submission");
        return a.defer(
          token,
          jitter(Math.max(deps.pollIntervalMs, Math.min(10_000, v.until.getTime() - Date.now()))),
          "forgotten submission: statement not complete yet",
        );
      case "not-paid":
        logger.warn(line, "the rail's statement shows no payment for a forgotten submission: the payout may be submitted again");
        await store.clearLostSubmission(p.payoutId, token, lost.ref);
        return undefined;
    }
  }

  /** What the ledger says about a submission, written on the payout (or waited for). */
  async function settle(a: Attempt, s: Submission, token: bigint): Promise<PayOutcome> {
    const v = verdictFor(s);
    if (v.kind === "record") {
      if (v.write.state === "NEEDS_ATTENTION") metrics.needsAttention.inc({ reason: (v.write.attentionReason ?? "unspecified").toLowerCase() });
      return a.record(token, { ...v.write, submissionRef: s.payoutId });
    }
    return afterLostAnswer(a, s.payoutId, token, "submission still forwarding");
  }
}
