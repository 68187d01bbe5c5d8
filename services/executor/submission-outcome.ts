/**
 * What a rail-proxy Submission means for the payout row. Pure, so the whole table is unit-tested.
 *
 * The executor never decides that money did or did not move by itself: it copies what the
 * proxy's intent ledger says. An ambiguous submission becomes UNKNOWN and stays there until the
 * reconciler or a human resolves it (UC-07); nothing here ever leads to a resubmission.
 */
import { SubmissionState, type Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import type { OutcomeWrite } from "./payout-store.js";

/** A write to make, or "wait" when the proxy is still talking to the rail. */
export type SubmissionVerdict = { kind: "record"; write: OutcomeWrite } | { kind: "wait" };

export function verdictFor(s: Submission): SubmissionVerdict {
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
