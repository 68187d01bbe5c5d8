/**
 * The reference an executor submits to rail-proxy (SubmitPayout.payout_id, and so the rail's
 * client_reference).
 *
 * - "payout" (the default, and what honest executors do): the payout id itself. The proxy's
 *   primary key then makes a second submission of the same payout impossible, whoever sends it.
 * - "attempt": `<payout id>:t<fencing token>`, a fresh reference per attempt. This is the worst
 *   case an untrusted executor can present (INV-07, ADR-007 D5: "a stale writer always carries
 *   a fresh payout id"): the duplicate check cannot help, and only the high-water mark stands
 *   between a stale holder and a second payment. Drills run executors in this mode so that what
 *   they prove is the fence, not the primary key.
 *
 * Payout ids never contain ":t<digits>" at the end (server-assigned `po_...`), so the payout
 * of a reference is always recoverable.
 */
export type SubmissionReferenceMode = "payout" | "attempt";

const ATTEMPT_SUFFIX = /:t\d+$/;

export function submissionRef(payoutId: string, token: bigint, mode: SubmissionReferenceMode): string {
  return mode === "attempt" ? `${payoutId}:t${token}` : payoutId;
}

/** The payout a submission reference belongs to. */
export function payoutIdOf(reference: string): string {
  return reference.replace(ATTEMPT_SUFFIX, "");
}
