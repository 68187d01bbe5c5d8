/**
 * How a rail payment is tied to a payout, for everyone who compares the rail's statement with
 * paydb (the reconciler, `railfence check`, the drills): by its reference, through the one
 * mapping in submission-ref.ts, AND by what it pays (account, amount, currency, beneficiary).
 *
 * A second payment of a payout can arrive under any reference (`po_1.retry`, a made-up id):
 * matching by content is what keeps such a payment from mapping to "no payout" and slipping past
 * every check. A payment whose reference names a payout but whose content differs is a payment
 * of the wrong thing, never a payment of that payout.
 */

export interface PaymentContent {
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
}

/** The fields of `payment` that differ from `payout` (empty: the same content). */
export function contentDifferences(payment: PaymentContent, payout: PaymentContent): string[] {
  const diff: string[] = [];
  if (payment.accountId !== payout.accountId) diff.push("account_id");
  if (payment.amountMinor !== payout.amountMinor) diff.push("amount_minor");
  if (payment.currency !== payout.currency) diff.push("currency");
  if (payment.beneficiary !== payout.beneficiary) diff.push("beneficiary");
  return diff;
}

/** A key equal for equal content: group payments and payouts that pay the same thing. */
export function contentKey(c: PaymentContent): string {
  return JSON.stringify([c.accountId, c.amountMinor.toString(), c.currency, c.beneficiary]);
}
