/**
 * The fence (SPEC C3 §3.5). Steps in fixed order:
 *   0 validate -> 1 token > mark -> 2 not a duplicate -> 3 mark + intent committed -> 4 forward once.
 * Steps 1-3 are one database statement (see submission-store.ts). The rail is called only
 * after the intent is durable, exactly once, with a deadline, and never retried.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError } from "../shared/errors.js";
import type { Logger } from "../shared/logger.js";
import { dbUnavailable, retryWhileUnavailable } from "../shared/pg.js";
import { PaymentStatus } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import { annotate } from "../shared/tracing.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { RailClient } from "./rail-client.js";
import type { Intent, SubmissionRow, SubmissionStore } from "./submission-store.js";

export interface AdmissionDeps {
  store: SubmissionStore;
  rail: RailClient;
  metrics: ProxyMetrics;
  logger: Logger;
  fencingEnabled: boolean;
  /** "memory": the rejected in-process map of ADR-007 §7.2, for harness negative controls only. */
  markStore?: "paydb" | "memory";
  railDeadlineMs: number;
}

/** Rail errors that prove the rail refused the call before booking anything. */
const RAIL_REFUSALS = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.InvalidArgument]);

export function createAdmission(deps: AdmissionDeps) {
  const { store, rail, metrics, logger } = deps;
  // ADR-007 §7.2's ConcurrentHashMap<accountId, token>: forgets on restart (i) and differs per
  // replica (ii). Used only when a drill asks for it, to show the checker catches what it lets through.
  const memoryMarks = deps.markStore === "memory" ? new Map<string, bigint>() : undefined;

  /** Writing the outcome is a paydb write, not a rail call: retrying it is safe. */
  async function recordOutcome(...args: Parameters<SubmissionStore["recordOutcome"]>): Promise<SubmissionRow | undefined> {
    try {
      return await retryWhileUnavailable(() => store.recordOutcome(...args));
    } catch {
      // The row stays FORWARDING; the sweeper makes it ambiguous and the reconciler closes it.
      logger.error({ event: "outcome_not_recorded", payout_id: args[0], state: args[1] }, "could not record rail outcome");
      return undefined;
    }
  }

  return async function submit(intent: Intent): Promise<SubmissionRow> {
    // Steps 1-3.
    const started = performance.now();
    let result;
    try {
      if (memoryMarks) {
        const seen = memoryMarks.get(intent.accountId) ?? 0n;
        if (intent.token > seen) memoryMarks.set(intent.accountId, intent.token);
        result = intent.token > seen ? await store.admit(intent, false) : "FENCED_OUT";
      } else {
        result = await store.admit(intent, deps.fencingEnabled);
      }
    } catch (err) {
      metrics.admissionSeconds.observe({ result: "ERROR" }, (performance.now() - started) / 1000);
      annotate({ "railfence.admission": "PAYDB_UNAVAILABLE" });
      // The money path refuses: retry later, nothing was forwarded.
      dbUnavailable("PAYDB", err, "nothing was forwarded");
    }
    metrics.admissionSeconds.observe({ result }, (performance.now() - started) / 1000);
    annotate({ "railfence.admission": result === "DUPLICATE" ? "DUPLICATE_SUBMISSION" : result });
    if (result === "FENCED_OUT") {
      metrics.fencedOut.inc();
      throw new DomainError(Code.Aborted, "FENCED_OUT", "fencing token is not above the account's high-water mark; the rail was not called", {
        account_id: intent.accountId,
      });
    }
    if (result === "DUPLICATE") {
      metrics.duplicate.inc();
      logger.warn({ event: "duplicate_submission", payout_id: intent.payoutId }, "payout submitted twice (caller must not retry)");
      throw new DomainError(Code.AlreadyExists, "DUPLICATE_SUBMISSION", "this payout was already submitted; call GetSubmission", {
        payout_id: intent.payoutId,
      });
    }
    metrics.admitted.inc();

    // Step 4: forward once. Not tied to the caller's signal: a caller that leaves must not
    // stop us from recording what the rail did.
    const railStarted = performance.now();
    let answer;
    try {
      answer = await rail.submitPayment(
        {
          clientReference: intent.payoutId,
          accountId: intent.accountId,
          beneficiary: intent.beneficiary,
          amount: { amountMinor: intent.amountMinor, currency: intent.currency },
        },
        { timeoutMs: deps.railDeadlineMs },
      );
    } catch (err) {
      const ce = ConnectError.from(err);
      if (RAIL_REFUSALS.has(ce.code)) {
        metrics.railOutcome.inc({ outcome: "REFUSED" });
        metrics.railCallSeconds.observe({ outcome: "REFUSED" }, (performance.now() - railStarted) / 1000);
        logger.error({ event: "rail_refused", code: Code[ce.code], payout_id: intent.payoutId }, "rail refused the call");
        const row = await recordOutcome(intent.payoutId, "REJECTED", null, `RAIL_${Code[ce.code].toUpperCase()}`, null);
        if (row) return row;
        throw new DomainError(Code.Aborted, "RAIL_AMBIGUOUS", "rail refused the call but the outcome could not be recorded");
      }
      metrics.railOutcome.inc({ outcome: "TIMEOUT" });
      annotate({ "railfence.rail_outcome": "TIMEOUT" });
      metrics.railCallSeconds.observe({ outcome: "TIMEOUT" }, (performance.now() - railStarted) / 1000);
      await recordOutcome(intent.payoutId, "TIMEOUT", null, null, ce.code === Code.DeadlineExceeded ? "RAIL_DEADLINE" : "RAIL_ERROR");
      throw new DomainError(Code.Aborted, "RAIL_AMBIGUOUS", "the rail's answer was lost; the payout may or may not have moved money. Do not resubmit; it will be reconciled", {
        payout_id: intent.payoutId,
      });
    }
    const accepted = answer.status === PaymentStatus.ACCEPTED;
    annotate({ "railfence.rail_outcome": accepted ? "ACCEPTED" : "REJECTED" });
    const outcome = accepted ? "ACCEPTED" : "REJECTED";
    metrics.railOutcome.inc({ outcome });
    metrics.railCallSeconds.observe({ outcome }, (performance.now() - railStarted) / 1000);
    const row = await recordOutcome(intent.payoutId, outcome, answer.railReference, accepted ? null : answer.reason, null);
    if (row) return row;
    // Money may have moved and the ledger could not say so: report the rail's answer anyway. The
    // row stays FORWARDING, the sweeper makes it ambiguous and the reconciler closes it.
    const now = new Date();
    return {
      payout_id: intent.payoutId,
      account_id: intent.accountId,
      fencing_token: intent.token.toString(),
      amount_minor: intent.amountMinor.toString(),
      currency: intent.currency,
      beneficiary: intent.beneficiary,
      state: outcome,
      rail_reference: answer.railReference,
      rail_reason: accepted ? null : answer.reason,
      replica_id: intent.replicaId,
      mark_advanced: true,
      created_at: now,
      updated_at: now,
      ambiguity_cause: null,
      previous_state: null,
      resolution_outcome: null,
      resolution_actor: null,
      resolution_note: null,
      resolved_at: null,
      ambiguous: false,
      cursor: now.toISOString(),
    };
  };
}
