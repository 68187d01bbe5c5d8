import { int8 } from "./int8.js";
/**
 * The reference a submission is made under (SubmitPayout.payout_id, and so the rail's
 * client_reference), and the one mapping from a reference back to its payout. rail-proxy binds
 * every submission to the payout this mapping names (SPEC C3 §3.9); the checker, the reconciler
 * and the executor use the same mapping.
 *
 * A reference is either the payout id itself, or `<payout id>:t<fencing token>` (an attempt
 * reference). Nothing else maps to a payout, and an attempt reference's token must be the token
 * it is submitted with.
 *
 * - "payout" mode (the default, and what honest executors do): the payout id; an attempt
 *   reference only when an earlier submission of the payout already took the plain id (it was
 *   NOT_FORWARDED, so the payout must be submitted again).
 * - "attempt" mode: always `<payout id>:t<token>`, a fresh reference per attempt. This is the
 *   worst case an untrusted executor can present (INV-07, ADR-007 D5: "a stale writer always
 *   carries a fresh payout id"); drills run in it so that the reference (the proxy's primary
 *   key) is never what stops a second payment.
 *
 * Payout ids are server-assigned (`po_...`) and never end in ":t<digits>".
 */
export type SubmissionReferenceMode = "payout" | "attempt";

const ATTEMPT = /^(.+):t(\d{1,19})$/;

export function submissionRef(payoutId: string, token: bigint, mode: SubmissionReferenceMode, plainIdTaken = false): string {
  return mode === "attempt" || plainIdTaken ? `${payoutId}:t${token}` : payoutId;
}

/** The payout a reference pays, and the token an attempt reference names. */
export function parseSubmissionRef(reference: string): { payoutId: string; token?: bigint } {
  const m = ATTEMPT.exec(reference);
  return m ? { payoutId: m[1]!, token: int8(m[2]!) } : { payoutId: reference };
}

/** The payout a submission reference belongs to. */
export function payoutIdOf(reference: string): string {
  return parseSubmissionRef(reference).payoutId;
}
