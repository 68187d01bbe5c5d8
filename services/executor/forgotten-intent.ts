/**
 * A submission whose answer was lost and which paydb then did not know (GetSubmission NOT_FOUND).
 * Either its admission never committed (the proxy died first: nothing was sent), or paydb forgot a
 * committed intent (a failover to a standby that had not received it, a restore to an earlier
 * point) after the rail was called. The executor cannot tell which, so NOT_FOUND is never read
 * as "not sent" (decision 023): the rail's own statement decides.
 *
 * | the statement, for the payout's references (any reference shape) | verdict |
 * |---|---|
 * | one ACCEPTED payment | `paid`: record PAID with its rail reference; the missing intent is an incident (logged, counted) |
 * | more than one ACCEPTED, or a status nobody documents | `human` |
 * | nothing ACCEPTED, and it is complete up to the loss + window + skew | `not-paid`: submit again |
 * | nothing ACCEPTED yet, not complete that far | `wait` |
 */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Payment, PaymentStatus } from "../shared/gen/railfence/rail/v1/rail_pb.js";

export type ForgottenVerdict = { kind: "paid"; payment: Payment } | { kind: "not-paid" } | { kind: "wait"; until: Date } | { kind: "human"; detail: string };

export function forgottenIntentVerdict(
  payments: Payment[],
  coveredUntil: Date,
  lostAt: Date,
  ctx: { settlementWindowMs: number; clockSkewAllowanceMs: number },
): ForgottenVerdict {
  const accepted = payments.filter((p) => p.status === PaymentStatus.ACCEPTED);
  const unknown = payments.filter((p) => p.status !== PaymentStatus.ACCEPTED && p.status !== PaymentStatus.REJECTED);
  if (accepted.length > 1) {
    return {
      kind: "human",
      detail: `the rail paid the payout ${accepted.length} times: ${accepted.map((p) => `${p.railReference} (${p.clientReference})`).join(", ")}`,
    };
  }
  if (unknown.length > 0) return { kind: "human", detail: `the rail's statement shows a status nobody documents for ${unknown[0]!.clientReference}` };
  if (accepted.length === 1) return { kind: "paid", payment: accepted[0]! };
  const until = new Date(lostAt.getTime() + ctx.settlementWindowMs + ctx.clockSkewAllowanceMs);
  return coveredUntil.getTime() >= until.getTime() ? { kind: "not-paid" } : { kind: "wait", until };
}

/** When the payment was booked, for the log. */
export const bookedAt = (p: Payment) => (p.bookedAt ? timestampDate(p.bookedAt).toISOString() : null);
