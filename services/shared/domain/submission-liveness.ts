/**
 * Which of a payout's submissions still decide it: one definition for the executor, the same rule
 * paydb's one-live index enforces (migration 011) and rail-proxy's sweeper closes UNKNOWN payouts
 * by (closeSettledUnknown in services/rail-proxy/submission-store.ts).
 *
 * Only a proven not-sent re-opens a payout: NOT_FORWARDED (the rail was never called) or REJECTED
 * (the rail's documented final refusal). RESOLVED_NOT_PAID is a judgement and keeps the payout
 * closed, until an operator re-opens it explicitly (reopen_payout, recorded on the submission);
 * from then on the submissions before that re-opening decide nothing.
 */
import { SubmissionState, type Submission } from "../gen/railfence/railproxy/v1/rail_proxy_pb.js";

/** True when the submission cannot have paid and may precede another one. */
// [rule:one-live-lookup]
export function provablyNotPaid(s: Submission): boolean {
  return s.state === SubmissionState.REJECTED || s.state === SubmissionState.NOT_FORWARDED || (s.state === SubmissionState.RESOLVED_NOT_PAID && !!s.reopening);
}
// [/rule:one-live-lookup]

/** The submissions after the payout's last re-opening (all of them when it was never re-opened), oldest first. */
export function sinceLastReopening(submissions: Submission[]): Submission[] {
  let last = -1;
  submissions.forEach((s, i) => {
    if (s.reopening) last = i;
  });
  return submissions.slice(last + 1);
}
