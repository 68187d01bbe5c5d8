/**
 * The fence (SPEC C3 §3.5, ADR-007 D2-D4), and its defense in depth (§3.9). In fixed order:
 *   0 validate (proxy-handlers.ts)
 *   1-3 one statement (submission-store.ts, rail_admit): payout binding, token > mark, intent
 *       committed with the mark before anything is forwarded; a duplicate or a second live
 *       submission of the payout rolls all of it back
 *   the pre-forward budget: no rail call for a row the sweeper could already have declared
 *       ambiguous (more than the budget since the admission statement was sent: NOT_FORWARDED),
 *       counted on two clocks: this process's monotonic clock from the statement's send, and
 *       paydb's forward deadline (the row's created_at + budget) read on the wall clock with
 *       the skew allowance (a pause the monotonic clock did not see is seen by the wall clock)
 *   4 forward once, with a deadline, never retried; the answer recorded; an answer for a row
 *       resolved meanwhile recorded as a late answer, never dropped and never invented.
 *
 * Returns an outcome; proxy-handlers.ts alone turns outcomes into Connect codes. Production builds
 * it with every guard on (guards.ts); a harness negative control builds it with one removed,
 * through these dependencies (tools/harness/controls/rail-proxy.ts), never through a setting.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "../shared/process/logger.js";
import { retryWhileUnavailable } from "../shared/db/pg.js";
import { railStatusName, readRailStatus, type RailStatusReading } from "../shared/domain/rail-status.js";
import { sendGateContext, type SendGate } from "../shared/rpc/send-gate.js";
import { annotate } from "../shared/observability/tracing.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { RailClient } from "./rail-client.js";
import type { AdmitResult, Intent, SubmissionRow, SubmissionStore } from "./submission-store.js";

/** The guards around the admission statement (the statement's own are the store's: submission-store.ts). */
export interface Guards {
  /** Longest time from sending the admission statement to starting the rail call. undefined:
   * the guard is removed (a harness negative control). Always below the ambiguity margin (config.ts). */
  forwardBudgetMs: number | undefined;
  /** The rail call waits for a connected session before the gate, and a request given up before
   * it was written resets its connection (rail-client.ts). false: a harness negative control. */
  connectedSession: boolean;
  /** The budget is checked again by the send gate, right before the write. false: a harness negative control. */
  sendGate: boolean;
  /** The budget is also counted on the wall clock, from paydb's admission time (the row's
   * created_at), so a pause hidden from the monotonic clock is seen. false: a harness negative control. */
  wallClock: boolean;
  /** How far this host's wall clock may be from paydb's (config.ts). An admission that shows more
   * is not forwarded; the paydb deadline is checked this much early. */
  clockSkewAllowanceMs: number;
}

/** A harness negative control deciding step 1 before the statement (ADR-007's rejected in-memory map). */
export type MarkPrecheck = (accountId: string, token: bigint) => boolean;

export interface AdmissionDeps {
  store: SubmissionStore;
  rail: RailClient;
  metrics: ProxyMetrics;
  logger: Logger;
  guards: Guards;
  markPrecheck?: MarkPrecheck;
  railDeadlineMs: number;
  /** A stall a test plants right after the last budget check passed (the residual window). */
  holdAfterBudgetCheck?: () => void;
  /** A stall a test plants after the first budget check passed, before the send gate checks again. */
  holdBeforeSendGate?: () => void;
  /** Monotonic milliseconds (tests may step it). */
  now?: () => number;
  /** Wall-clock epoch milliseconds (tests may step it). */
  wallNow?: () => number;
  /** How a rail status is read (shared/domain/rail-status.ts). Tests inject another reading as a negative control. */
  readStatus?: (status: number) => RailStatusReading;
}

export type Refusal = Exclude<AdmitResult, { kind: "ADMITTED" }>;

export type SubmitOutcome =
  /** The rail answered and the ledger holds the row (after a late answer: the resolved row with it). */
  | { kind: "ANSWERED"; row: SubmissionRow }
  /** Refused before anything was written or forwarded. */
  | { kind: "REFUSED"; refusal: Refusal }
  /** Admitted, then given up before the rail call: the rail was not called. */
  | { kind: "NOT_FORWARDED"; forwardDelayMs: number }
  /** The rail may or may not have moved money: recorded TIMEOUT (or left FORWARDING for the sweeper). */
  | { kind: "AMBIGUOUS"; cause: "RAIL_DEADLINE" | "RAIL_ERROR" | "RAIL_STATUS_UNKNOWN" | "OUTCOME_NOT_RECORDED" }
  /** paydb could not admit: nothing was forwarded. */
  | { kind: "PAYDB_UNAVAILABLE"; error: unknown };

/** Rail errors that prove the rail refused the call before booking anything. */
const RAIL_REFUSALS = new Set([Code.Unauthenticated, Code.PermissionDenied, Code.InvalidArgument]);

export function createAdmission(deps: AdmissionDeps) {
  const { store, rail, metrics, logger, guards } = deps;
  const now = deps.now ?? (() => performance.now());
  const wallNow = deps.wallNow ?? (() => Date.now());
  const readStatus = deps.readStatus ?? readRailStatus;

  /** Writing to the ledger is a paydb write, not a rail call: retrying it is safe. */
  async function write<T>(what: string, reference: string, fn: () => Promise<T>): Promise<T | undefined | "FAILED"> {
    try {
      return await retryWhileUnavailable(fn);
    } catch (err) {
      // The row stays FORWARDING; the sweeper makes it ambiguous and the reconciler closes it.
      logger.error(
        { event: "ledger_write_failed", what, payout_id: reference, error: err instanceof Error ? err.message : String(err) },
        "could not write to the intent ledger",
      );
      return "FAILED";
    }
  }

  function refused(refusal: Refusal, intent: Intent): SubmitOutcome {
    annotate({ "railfence.admission": refusal.kind === "DUPLICATE" ? "DUPLICATE_SUBMISSION" : refusal.kind });
    if (refusal.kind === "FENCED_OUT") metrics.fencedOut.inc();
    else if (refusal.kind === "DUPLICATE") {
      metrics.duplicate.inc();
      logger.warn({ event: "duplicate_submission", payout_id: intent.reference }, "payout submitted twice under one reference (caller must not retry)");
    } else {
      metrics.bindingRefused.inc({ reason: refusal.kind.toLowerCase() });
      logger.warn(
        { event: "binding_refused", reason: refusal.kind, payout_id: intent.reference, bound_payout_id: intent.payoutId },
        "submission does not match a payable payout",
      );
    }
    return { kind: "REFUSED", refusal };
  }

  // [rule:late-answer]
  /** The answer arrived for a row no longer waiting for one: record it on the ledger, never drop it. */
  async function lateAnswer(intent: Intent, state: "ACCEPTED" | "REJECTED", railReference: string, railReason: string | null): Promise<SubmitOutcome> {
    const row = await write("late_answer", intent.reference, () => store.recordLateAnswer(intent.reference, state, railReference, railReason));
    if (row && row !== "FAILED") {
      metrics.lateAnswer.inc({ previous_state: row.state.toLowerCase() });
      logger.error(
        {
          event: "rail_late_answer",
          payout_id: intent.reference,
          bound_payout_id: intent.payoutId,
          previous_state: row.state,
          answer: state,
          rail_reference: railReference,
        },
        "the rail answered a submission that was already resolved; the payout is flagged for a human",
      );
      return { kind: "ANSWERED", row };
    }
    // Not resolved either (or the write failed): whatever the ledger holds is the answer.
    const current = row === "FAILED" ? undefined : await store.get(intent.reference).catch(() => undefined);
    logger.error(
      { event: "rail_answer_unrecorded", payout_id: intent.reference, answer: state, rail_reference: railReference, ledger_state: current?.state ?? null },
      "the rail answered but the ledger could not take the answer",
    );
    return current ? { kind: "ANSWERED", row: current } : { kind: "AMBIGUOUS", cause: "OUTCOME_NOT_RECORDED" };
  }
  // [/rule:late-answer]

  return async function submit(intent: Intent): Promise<SubmitOutcome> {
    const requested = now();
    // The budget counts from the send of the statement that carries this intent (with group
    // admission, the group's: decision 068), on both clocks; the store says when that is.
    let sent = requested;
    let sentWall = wallNow();
    const statementSent = () => {
      sent = now();
      sentWall = wallNow();
    };
    if (deps.markPrecheck && !deps.markPrecheck(intent.accountId, intent.token)) return refused({ kind: "FENCED_OUT" }, intent);

    // Binding + steps 1-3: one statement (alone, or with the admissions that arrived meanwhile).
    // [rule:admission-domain]
    let admitted: AdmitResult;
    try {
      // [rule:d3-one-statement]
      admitted = await store.admit(intent, statementSent);
    } catch (error) {
      metrics.admissionSeconds.observe({ result: "error" }, (now() - requested) / 1000);
      annotate({ "railfence.admission": "PAYDB_UNAVAILABLE" });
      return { kind: "PAYDB_UNAVAILABLE", error };
    }
    metrics.admissionSeconds.observe({ result: admitted.kind.toLowerCase() }, (now() - requested) / 1000);
    if (admitted.kind !== "ADMITTED") return refused(admitted, intent);
    metrics.admitted.inc();
    annotate({ "railfence.admission": "ADMITTED" });

    // [/rule:admission-domain]
    // [rule:forward-budget]
    // No rail call for a row the sweeper could already have declared ambiguous: it sweeps a row
    // deadline + margin after created_at, which is after `sent`; a call started within the
    // budget (< margin) has ended, answered or timed out, before that. Checked here, and again
    // by the send gate at the last moment before the request is written (after the client's
    // interceptors and encoding), so the window left is the one between that check and the socket.
    //
    // Two clocks: the monotonic one cannot step back, but a paused VM's guest may not see the
    // pause on it; the sweeper judges by paydb's wall clock, so the budget also ends at paydb's
    // deadline (created_at + budget), read on this host's wall clock less the skew allowance.
    const skew = guards.clockSkewAllowanceMs;
    const paydbDeadline = admitted.admittedAtMs + (guards.forwardBudgetMs ?? 0);
    const overBudget = () => {
      if (guards.forwardBudgetMs === undefined) return undefined;
      const delayMs = now() - sent;
      // [rule:budget-monotonic]
      if (delayMs > guards.forwardBudgetMs) return delayMs;
      const wall = wallNow();
      // [rule:budget-wall-clock]
      if (guards.wallClock && wall + skew > paydbDeadline) return Math.max(delayMs, wall - sentWall);
      return undefined;
    };
    const notForwarded = async (forwardDelayMs: number, where: string): Promise<SubmitOutcome> => {
      metrics.notForwarded.inc();
      annotate({ "railfence.rail_outcome": "NOT_FORWARDED" });
      logger.warn(
        {
          event: "not_forwarded",
          payout_id: intent.reference,
          forward_delay_ms: Math.round(forwardDelayMs),
          budget_ms: guards.forwardBudgetMs,
          checked: where,
        },
        "the rail was not called: the pre-forward budget passed, or no connection to the rail was made in time",
      );
      await write("not_forwarded", intent.reference, () => store.markNotForwarded(intent.reference, forwardDelayMs));
      return { kind: "NOT_FORWARDED", forwardDelayMs };
    };
    // paydb's clock must agree with ours within the allowance, or its deadline means nothing
    // here: the statement's start (created_at) lies between our send and our receipt.
    const receivedWall = wallNow();
    if (guards.wallClock && (admitted.admittedAtMs < sentWall - skew || admitted.admittedAtMs > receivedWall + skew)) {
      metrics.clockSkew.inc();
      logger.error(
        {
          event: "clock_skew_exceeded",
          payout_id: intent.reference,
          paydb_admitted_at: new Date(admitted.admittedAtMs).toISOString(),
          sent_at: new Date(sentWall).toISOString(),
          received_at: new Date(receivedWall).toISOString(),
          allowance_ms: skew,
        },
        "paydb's clock and this host's differ by more than the allowance: nothing is forwarded until they agree",
      );
      return notForwarded(now() - sent, "clock skew");
    }
    const forwardDelayMs = now() - sent;
    const late = overBudget();
    if (late !== undefined) return notForwarded(late, "before the call");
    let refusedAtSend: number | undefined;
    let unsent: string | undefined;
    const gate: SendGate = {
      unsent: (reason) => {
        unsent = reason;
      },
      beforeSend: () => {
        deps.holdBeforeSendGate?.();
        if (!guards.sendGate) return undefined;
        // [rule:send-gate]
        refusedAtSend = overBudget();
        if (refusedAtSend !== undefined) return `the pre-forward budget (${guards.forwardBudgetMs} ms) passed before the request was written`;
        // [/rule:forward-budget]
        deps.holdAfterBudgetCheck?.();
        return undefined;
      },
      sent: () => {
        // The residual window was used: the request left after the budget (a stall between the
        // last check and the socket). Not preventable here; seen, so that a NOT_PAID verdict the
        // rail then contradicts is explained (its late answer flags the payout for a human).
        const sentMs = Math.max(now() - sent, wallNow() - sentWall);
        if (guards.forwardBudgetMs === undefined || sentMs <= guards.forwardBudgetMs) return;
        metrics.sentLate.inc();
        logger.error(
          { event: "rail_request_sent_late", payout_id: intent.reference, sent_delay_ms: Math.round(sentMs), budget_ms: guards.forwardBudgetMs },
          "the rail request left the process after the pre-forward budget (a stall after the last check): if its row was resolved meanwhile, the rail's answer is a late answer",
        );
      },
    };

    // [rule:forward]
    // Step 4: forward once. Not tied to the caller's signal: a caller that leaves must not stop
    // us from recording what the rail did.
    const railStarted = now();
    const observe = (outcome: string) => {
      metrics.railOutcome.inc({ outcome: outcome.toLowerCase() });
      metrics.railCallSeconds.observe({ outcome: outcome.toLowerCase() }, (now() - railStarted) / 1000);
      annotate({ "railfence.rail_outcome": outcome });
    };
    let answer;
    // [rule:answer-or-deadline]
    try {
      // [rule:d4-forward-once]
      answer = await rail.submitPayment(
        {
          clientReference: intent.reference,
          accountId: intent.accountId,
          beneficiary: intent.beneficiary,
          amount: { amountMinor: intent.amountMinor, currency: intent.currency },
        },
        { timeoutMs: deps.railDeadlineMs, contextValues: sendGateContext(gate) },
      );
      // [/rule:forward]
    } catch (err) {
      // The gate refused: nothing was written, the rail was not called.
      if (refusedAtSend !== undefined) return notForwarded(refusedAtSend, "before the write");
      // No connection to the rail in time (or it closed first): no stream was opened.
      if (unsent !== undefined) return notForwarded(now() - sent, `not connected: ${unsent}`);
      const ce = ConnectError.from(err);
      if (RAIL_REFUSALS.has(ce.code)) {
        observe("REFUSED");
        logger.error({ event: "rail_refused", code: Code[ce.code], payout_id: intent.reference }, "rail refused the call");
        const reason = `RAIL_${Code[ce.code].toUpperCase()}`;
        const row = await write("outcome", intent.reference, () => store.recordOutcome(intent.reference, "REJECTED", null, reason, null, forwardDelayMs));
        if (row && row !== "FAILED") return { kind: "ANSWERED", row };
        return row === "FAILED" ? { kind: "AMBIGUOUS", cause: "OUTCOME_NOT_RECORDED" } : lateAnswer(intent, "REJECTED", "", reason);
      }
      observe("TIMEOUT");
      // [/rule:answer-or-deadline]
      const cause = ce.code === Code.DeadlineExceeded ? "RAIL_DEADLINE" : "RAIL_ERROR";
      // [rule:record-outcome]
      const row = await write("outcome", intent.reference, () => store.recordOutcome(intent.reference, "TIMEOUT", null, null, cause, forwardDelayMs));
      if (row === undefined) {
        // Nothing to record over: the row was swept or resolved while the call was out. Whatever
        // [rule:d4-late-answer]
        // the rail did, the resolution (and the reconciler's watch over NOT_PAID) stands.
        const current = await store.get(intent.reference).catch(() => undefined);
        logger.warn(
          { event: "rail_timeout_after_resolution", payout_id: intent.reference, cause, ledger_state: current?.state ?? null },
          "the rail call ended without an answer after its row had left FORWARDING; the ledger's state stands",
        );
      }
      return { kind: "AMBIGUOUS", cause };
    }
    // [rule:d4-unknown-status]
    const reading = readStatus(answer.status);
    if (reading === "UNKNOWN") {
      // An answer with a status the rail protocol does not document (unset, or one this build
      // does not know): it proves neither that money moved nor that it did not. Ambiguous, as a
      // timeout is; the reconciler decides from the statement. Never "rejected".
      observe("TIMEOUT");
      const status = railStatusName(answer.status);
      logger.error(
        { event: "rail_status_unknown", payout_id: intent.reference, status, rail_reference: answer.railReference },
        "the rail answered with a status this build does not know; recorded as ambiguous",
      );
      const row = await write("outcome", intent.reference, () =>
        store.recordOutcome(intent.reference, "TIMEOUT", answer.railReference || null, `RAIL_STATUS_${status}`, "RAIL_STATUS_UNKNOWN", forwardDelayMs),
      );
      // [/rule:record-outcome]
      if (row === undefined) {
        const current = await store.get(intent.reference).catch(() => undefined);
        logger.warn(
          { event: "rail_timeout_after_resolution", payout_id: intent.reference, cause: "RAIL_STATUS_UNKNOWN", ledger_state: current?.state ?? null },
          "the rail's unknown answer came after its row had left FORWARDING; the ledger's state stands",
        );
      }
      return { kind: "AMBIGUOUS", cause: "RAIL_STATUS_UNKNOWN" };
    }
    const state = reading;
    observe(state);
    const reason = state === "ACCEPTED" ? null : answer.reason;
    const row = await write("outcome", intent.reference, () =>
      store.recordOutcome(intent.reference, state, answer.railReference, reason, null, forwardDelayMs),
    );
    if (row === "FAILED") {
      // Money may have moved and the ledger could not say so: the row stays FORWARDING, the
      // sweeper makes it ambiguous and the reconciler closes it from the statement.
      logger.error(
        { event: "rail_answer_unrecorded", payout_id: intent.reference, answer: state, rail_reference: answer.railReference },
        "the rail answered but the ledger could not take the answer",
      );
      return { kind: "AMBIGUOUS", cause: "OUTCOME_NOT_RECORDED" };
    }
    if (!row) return lateAnswer(intent, state, answer.railReference, reason);
    if (row.ambiguity_cause === "STALE_FORWARDING") {
      // Swept as ambiguous while the call was in flight, not yet resolved: the answer closes it.
      metrics.lateAnswer.inc({ previous_state: "timeout" });
      logger.warn(
        { event: "rail_late_answer", payout_id: intent.reference, previous_state: "TIMEOUT", answer: state },
        "the rail answered a submission the sweeper had declared ambiguous",
      );
    }
    return { kind: "ANSWERED", row };
  };
}

export type Submit = ReturnType<typeof createAdmission>;
