/**
 * One attempt at one payout, as the executor's steps share it: where the time went, the one log
 * line every attempt ends with (and its metric), giving the payout back for later, and recording
 * an outcome on the row fenced by the attempt's token.
 */
import type { Logger } from "../shared/process/logger.js";
import { retryWhileUnavailable } from "../shared/db/pg.js";
import type { ExecutorMetrics } from "./executor-metrics.js";
import type { ClaimedPayout, OutcomeWrite, PayoutStore } from "./payout-store.js";

export type PayOutcome = "PAID" | "FAILED" | "UNKNOWN" | "NEEDS_ATTENTION" | "FENCED_OUT" | "DEFERRED" | "ABANDONED";

export interface AttemptDeps {
  store: PayoutStore;
  metrics: ExecutorMetrics;
  logger: Logger;
  executorId: string;
}

/** since: when the attempt began, if before now (payNext: the account's lock came before the payout). */
export function startAttempt(deps: AttemptDeps, p: ClaimedPayout, since = performance.now()) {
  const { store, metrics, logger, executorId } = deps;
  const started = since;
  // Where the time went, per step (ms), for the attempt's log line.
  const steps: Record<string, number> = {};
  let stepStarted = started;

  const attempt = {
    payoutId: p.payoutId,
    /** W3C context of the payout's trace, passed on every call. */
    headers: (p.traceparent ? { traceparent: p.traceparent } : {}) as Record<string, string>,

    /** The step `name` ended at `t` (now, unless it ended earlier). */
    step(name: string, t = performance.now()): void {
      steps[name] = Math.round((t - stepStarted) * 10) / 10;
      stepStarted = t;
    },

    /** Ends the attempt: one log line, one metric. */
    log(outcome: PayOutcome, extra: Record<string, unknown> = {}): PayOutcome {
      metrics.payouts.inc({ outcome: outcome.toLowerCase() });
      logger.info(
        {
          event: "payout_attempt",
          payout_id: p.payoutId,
          account_id: p.accountId,
          outcome,
          duration_ms: Math.round(performance.now() - started),
          steps_ms: steps,
          ...extra,
        },
        `payout ${outcome}`,
      );
      return outcome;
    },

    /** Leave the payout for a later attempt (by anyone) after retryAfterMs. */
    async defer(fenceAtMost: bigint, retryAfterMs: number, why: string, outcome: PayOutcome = "DEFERRED"): Promise<PayOutcome> {
      await store.deferClaim(p.payoutId, executorId, fenceAtMost, retryAfterMs).catch(() => {
        // paydb down: the claim simply lapses on its own.
      });
      return attempt.log(outcome, { why });
    },

    /** Records the outcome on the row fenced by `token` (fence <= token). */
    async record(token: bigint, write: OutcomeWrite): Promise<PayOutcome> {
      let written;
      try {
        // paydb writes are fenced, so retrying one is safe; a transient outage should not cost a payout.
        written = await retryWhileUnavailable(() => store.recordOutcome(p.payoutId, token, write));
      } catch {
        // The proxy's ledger holds the truth; the next attempt reads it.
        return attempt.log("DEFERRED", { why: "outcome not recorded (paydb)", fencing_token: token.toString() });
      }
      attempt.step("record");
      if (!written) {
        // Already closed in this very state by the statement that recorded or resolved its
        // submission (decisions 066, 072): a settled payout, not a newer holder's. Which
        // statement (the proxy's answer, an operator's or the reconciler's resolution) this
        // attempt cannot tell, and the log does not guess.
        if (write.state === "PAID" && (await store.stateOf(p.payoutId).catch(() => undefined)) === "PAID") {
          return attempt.log("PAID", { fencing_token: token.toString(), closed_by: "submission-statement", rail_reference: write.railReference ?? undefined });
        }
        metrics.fencedOut.inc({ where: "paydb" });
        return attempt.log("FENCED_OUT", { fencing_token: token.toString(), where: "paydb", at: "outcome" });
      }
      metrics.endToEnd.observe({ state: write.state.toLowerCase() }, written.ageSeconds);
      return attempt.log(write.state, {
        fencing_token: token.toString(),
        rail_reference: write.railReference ?? undefined,
        failure_reason: write.failureReason ?? undefined,
        attention_reason: write.attentionReason,
      });
    },

    /**
     * The proxy closed the payout PAID in the statement that recorded the rail's answer
     * (decision 072): nothing to write. Logged and measured as the executor's own write would
     * be; the end-to-end age is taken on this host's clock against paydb's created_at.
     */
    closedByProxy(token: bigint, railReference: string): PayOutcome {
      metrics.endToEnd.observe({ state: "paid" }, Math.max(0, Date.now() - p.createdAt.getTime()) / 1000);
      return attempt.log("PAID", { fencing_token: token.toString(), rail_reference: railReference || undefined, closed_by: "rail-proxy" });
    },

    /** A refusal no retry can cure: the payout waits for a human, counted and alerted. */
    needsHuman(token: bigint, ref: string, reason: string, detail: string): Promise<PayOutcome> {
      metrics.needsAttention.inc({ reason: reason.toLowerCase() });
      logger.error({ event: "needs_attention", payout_id: p.payoutId, reason, detail, fencing_token: token.toString() }, "payout needs a human");
      return attempt.record(token, { state: "NEEDS_ATTENTION", attentionReason: reason, attentionDetail: detail, submissionRef: ref });
    },
  };
  return attempt;
}

export type Attempt = ReturnType<typeof startAttempt>;
