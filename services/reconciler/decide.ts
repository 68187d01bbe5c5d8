/**
 * The reconciler's verdict on one ambiguous submission, from the rail's statement alone.
 * Pure (no I/O, the clock passed in), so every row of the decision table is unit-tested.
 *
 * | statement entries (own: the submission's reference; others: other payments of its payout) | decision |
 * |-----------------------------------------------------------------------|-----------|
 * | an own entry with another account, amount, currency, beneficiary,     | HUMAN     |
 * | or a status the rail protocol does not document (shared/rail-status)   |           |
 * | an accepted payment of the same payout under another reference         | HUMAN     |
 * | more than one own ACCEPTED (the rail paid twice)                       | HUMAN     |
 * | exactly one own ACCEPTED                                               | PAID      |
 * | only own REJECTED                                                      | NOT_PAID  |
 * | none, window passed AND statement covers created_at + window           | NOT_PAID  |
 * | none, otherwise                                                        | WAIT      |
 *
 * "Other payments of its payout" are those whose reference names the same payout, and those
 * whose reference names no payout but which pay exactly what the payout pays
 * (shared/domain/payment-match.ts): a second payment of a payout, under whatever reference, is never
 * mistaken for "nothing happened".
 *
 * "Absent" only means "not paid" once the rail has had the whole settlement window to book it
 * and its statement provably covers that window: a payment booked late must not be declared
 * unpaid (the payout would be paid again by hand). Nothing here ever leads to a resubmission.
 */
import type { StatementEntry as SharedStatementEntry } from "../shared/domain/rail-statement.js";

export interface AmbiguousSubmission {
  payoutId: string;
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
  createdAt: Date;
}

/** A line of the statement as decide() reads it (shared/domain/rail-statement.ts; its place in the statement does not matter here). */
export type StatementEntry = Omit<SharedStatementEntry, "bookedAt" | "sequence">;

export type Decision =
  | { decision: "PAID"; railReference: string; note: string }
  | { decision: "NOT_PAID"; failureReason: string; note: string }
  | { decision: "WAIT"; note: string }
  | { decision: "HUMAN"; note: string };

export interface DecideContext {
  now: Date;
  /** The rail statement is complete up to this instant. */
  coveredUntil: Date;
  settlementWindowMs: number;
  /** How far the rail's statement clock and this process's may be from paydb's (created_at). */
  clockSkewAllowanceMs: number;
}

// [rule:reconcile-decide]
export function decide(s: AmbiguousSubmission, entries: StatementEntry[], ctx: DecideContext, others: StatementEntry[] = []): Decision {
  const mine = entries.filter((e) => e.clientReference === s.payoutId);
  const elsewhere = others.filter((e) => e.clientReference !== s.payoutId && e.status === "ACCEPTED");
  if (elsewhere.length > 0) {
    const refs = elsewhere.map((e) => `${e.railReference} (${e.clientReference})`).join(",");
    return { decision: "HUMAN", note: `the rail also paid this payout under another reference: ${refs}; never resolve it by guessing` };
  }
  const mismatched = mine.filter(
    (e) =>
      e.accountId !== s.accountId || e.amountMinor !== s.amountMinor || e.currency !== s.currency || e.beneficiary !== s.beneficiary || e.status === "UNKNOWN",
  );
  if (mismatched.length > 0) {
    const refs = mismatched.map((e) => e.railReference).join(",");
    return {
      decision: "HUMAN",
      note: `statement entries for this payout differ from the intent (account/amount/currency/beneficiary) or carry a status this build does not know: ${refs}`,
    };
  }
  const accepted = mine.filter((e) => e.status === "ACCEPTED");
  if (accepted.length > 1) {
    return {
      decision: "HUMAN",
      note: `the rail booked ${accepted.length} accepted payments for this payout (double payment): ${accepted.map((e) => e.railReference).join(",")}`,
    };
  }
  if (accepted.length === 1) {
    const ref = accepted[0]!.railReference;
    return { decision: "PAID", railReference: ref, note: `found on the rail statement as ${ref}` };
  }
  const rejected = mine.filter((e) => e.status === "REJECTED");
  if (rejected.length > 0) {
    const r = rejected[0]!;
    return {
      decision: "NOT_PAID",
      failureReason: r.reason || "RAIL_REJECTED",
      note: `the rail booked it as REJECTED (${r.railReference}: ${r.reason || "no reason"})`,
    };
  }
  // Three clocks meet here: paydb's (created_at), ours (now) and the rail's (coveredUntil). The
  // window ends only once it has passed on the slowest of them the allowance permits.
  const windowEnd = s.createdAt.getTime() + ctx.settlementWindowMs + ctx.clockSkewAllowanceMs;
  if (ctx.now.getTime() >= windowEnd && ctx.coveredUntil.getTime() >= windowEnd) {
    return {
      decision: "NOT_PAID",
      failureReason: "NOT_ON_RAIL_STATEMENT",
      note: `absent from the rail statement ${ctx.settlementWindowMs} ms (+${ctx.clockSkewAllowanceMs} ms clock skew allowance) after submission (statement covers ${ctx.coveredUntil.toISOString()})`,
    };
  }
  return { decision: "WAIT", note: "not on the statement yet, and the settlement window is still open or not yet covered" };
}
// [/rule:reconcile-decide]
