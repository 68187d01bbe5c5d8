/**
 * What a failed SubmitPayout means for the payout. Pure, so the whole table is unit-tested.
 *
 * | answer                                                       | action        |
 * |--------------------------------------------------------------|---------------|
 * | ABORTED FENCED_OUT                                           | fenced-out (unless the lease is still ours: mark ahead of the lock) |
 * | FAILED_PRECONDITION PAYOUT_FENCE_MISMATCH, holder NEWER       | newer-holder  |
 * | FAILED_PRECONDITION PAYOUT_NOT_PAYABLE                        | closed        |
 * | ALREADY_EXISTS DUPLICATE_SUBMISSION / PAYOUT_ALREADY_SUBMITTED| settle the submission it names |
 * | ABORTED RAIL_AMBIGUOUS                                        | unknown       |
 * | ABORTED NOT_FORWARDED                                         | not-forwarded (the rail was not called) |
 * | PERMISSION_DENIED, UNAUTHENTICATED, TOKEN_SIGNATURE_INVALID, BOUND_PAYOUT_NOT_FOUND, PAYOUT_MISMATCH, PAYOUT_FENCE_MISMATCH (holder OLDER) | needs-human |
 * | INVALID_ARGUMENT with ErrorInfo (step 0)                      | invalid       |
 * | anything else (network, deadline, UNAVAILABLE, ...)           | lost: ask before anything else |
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { errorInfo, errorReason, hasReason, REASONS } from "../shared/domain/errors.js";

export type RefusalAction =
  | { kind: "fenced-out" }
  | { kind: "newer-holder"; reason: string }
  | { kind: "closed"; state: string }
  | { kind: "settle"; reference: string; reason: string }
  | { kind: "unknown" }
  | { kind: "not-forwarded" }
  | { kind: "needs-human"; reason: string; detail: string }
  | { kind: "invalid"; failureReason: string }
  | { kind: "lost"; what: string };

/** Refusals no retry can cure: the payout needs a human. */
const NEEDS_HUMAN = [REASONS.BOUND_PAYOUT_NOT_FOUND, REASONS.PAYOUT_MISMATCH, REASONS.TOKEN_SIGNATURE_INVALID, REASONS.PERMISSION_DENIED];

/** `reference` is the reference the submission was made under. */
export function refusalAction(err: unknown, reference: string): RefusalAction {
  const ce = ConnectError.from(err);
  const reason = errorReason(ce);
  const meta = errorInfo(ce)?.metadata ?? {};
  const is = (entry: (typeof REASONS)[keyof typeof REASONS]) => hasReason(ce, entry);
  if (is(REASONS.FENCED_OUT)) return { kind: "fenced-out" };
  if (is(REASONS.PAYOUT_FENCE_MISMATCH) && meta.holder === "NEWER") return { kind: "newer-holder", reason };
  if (is(REASONS.PAYOUT_NOT_PAYABLE)) return { kind: "closed", state: meta.state ?? "no longer payable" };
  if (is(REASONS.PAYOUT_ALREADY_SUBMITTED) && meta.live_submission) return { kind: "settle", reference: meta.live_submission, reason };
  if (is(REASONS.DUPLICATE_SUBMISSION) || is(REASONS.PAYOUT_ALREADY_SUBMITTED)) return { kind: "settle", reference, reason };
  if (is(REASONS.RAIL_AMBIGUOUS)) return { kind: "unknown" };
  if (is(REASONS.NOT_FORWARDED)) return { kind: "not-forwarded" };
  if (NEEDS_HUMAN.some(is) || ce.code === Code.PermissionDenied || ce.code === Code.Unauthenticated || is(REASONS.PAYOUT_FENCE_MISMATCH)) {
    return {
      kind: "needs-human",
      reason: reason || Code[ce.code].toUpperCase(),
      detail: `SubmitPayout refused: ${Code[ce.code]} ${reason}${meta.field ? ` (${meta.field})` : ""}`,
    };
  }
  // Step 0 refused the request: nothing was recorded or forwarded, and the same data would be
  // refused again. The payout cannot be paid as it stands.
  if (ce.code === Code.InvalidArgument && errorInfo(ce))
    return { kind: "invalid", failureReason: `INVALID_PAYOUT:${reason}${meta.field ? `:${meta.field}` : ""}` };
  return { kind: "lost", what: `${Code[ce.code]}${reason ? ` ${reason}` : ""}` };
}
