/**
 * What rail-proxy's intent ledger means for the payout row. Pure, so every rule is unit-tested.
 *
 * The executor never decides that money did or did not move by itself: it copies what the
 * proxy's ledger says. An ambiguous submission becomes UNKNOWN and stays there until the
 * reconciler or a human resolves it (UC-07); nothing here ever leads to a resubmission of a
 * submission that may have paid.
 */
import { SubmissionState, type Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { provablyNotPaid, sinceLastReopening } from "../shared/domain/submission-liveness.js";
import type { OutcomeWrite } from "./payout-store.js";

/** A write to make, or "wait" when the proxy is still talking to the rail. */
export type SubmissionVerdict = { kind: "record"; write: OutcomeWrite } | { kind: "wait" };

// [rule:verdict]
export function verdictFor(s: Submission): SubmissionVerdict {
  // The rail contradicted the resolution after the fact: the payout is a human's now.
  if (s.contradiction || (s.lateAnswer && (s.state === SubmissionState.RESOLVED_NOT_PAID) === (s.lateAnswer.state === SubmissionState.ACCEPTED))) {
    return { kind: "record", write: { state: "NEEDS_ATTENTION", attentionReason: s.contradiction ? "RESOLUTION_CONTRADICTED" : "LATE_RAIL_ANSWER" } };
  }
  switch (s.state) {
    case SubmissionState.ACCEPTED:
    case SubmissionState.RESOLVED_PAID:
      return { kind: "record", write: { state: "PAID", railReference: s.railReference || null, failureReason: null } };
    case SubmissionState.REJECTED:
      return { kind: "record", write: { state: "FAILED", railReference: s.railReference || null, failureReason: s.railReason || "RAIL_REJECTED" } };
    case SubmissionState.RESOLVED_NOT_PAID:
      return { kind: "record", write: { state: "FAILED", railReference: null, failureReason: "RESOLVED_NOT_PAID" } };
    case SubmissionState.TIMEOUT:
      return { kind: "record", write: { state: "UNKNOWN", failureReason: "RAIL_AMBIGUOUS" } };
    case SubmissionState.FORWARDING:
      // A FORWARDING row past the proxy's deadline + margin belongs to a replica that died
      // mid-call: ambiguous. Younger ones are still in flight: look again later.
      return s.ambiguous ? { kind: "record", write: { state: "UNKNOWN", failureReason: "RAIL_AMBIGUOUS" } } : { kind: "wait" };
    default:
      return { kind: "wait" };
  }
}
// [/rule:verdict]

/**
 * What a payout's earlier submissions (ListPayoutSubmissions, oldest first) mean for an attempt:
 * settle the one that decides the payout, or submit (and whether the plain payout id is taken,
 * so the new submission needs an attempt reference).
 */
export type Prior = { kind: "settle"; submission: Submission } | { kind: "submit"; plainIdTaken: boolean };

export function priorFor(payoutId: string, submissions: Submission[]): Prior {
  // A live submission may have paid or still may: it decides the payout, never a new one.
  // [rule:executor-prior]
  const live = submissions.find((s) => !provablyNotPaid(s));
  if (live) return { kind: "settle", submission: live };
  // The rail refused it (and no operator re-opened the payout since): the payout failed. A
  // re-opened payout's earlier submissions decide nothing any more.
  const final = [...sinceLastReopening(submissions)].reverse().find((s) => s.state === SubmissionState.REJECTED);
  if (final) return { kind: "settle", submission: final };
  // Only NOT_FORWARDED ones (the rail was never called), or none: pay it.
  return { kind: "submit", plainIdTaken: submissions.some((s) => s.payoutId === payoutId) };
}

// [/rule:executor-prior]
