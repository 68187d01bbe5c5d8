import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { findReason, railError } from "../shared/domain/errors.js";
import { refusalAction } from "./submit-refusal.js";

/** The answer the proxy gives for (code, reason), from the catalogue. */
const refusal = (code: Code, reason: string, metadata: Record<string, string> = {}) => railError(findReason(code, reason)!, "refused", metadata);

describe("what a refused SubmitPayout means for the payout", () => {
  it("FENCED_OUT: a newer token owns the account (or the mark is ahead of the lock)", () => {
    expect(refusalAction(refusal(Code.Aborted, "FENCED_OUT"), "po-1")).toEqual({ kind: "fenced-out" });
  });

  it("a newer fence on the payout is fenced out too; an older one means the executor never fenced it: a human's", () => {
    expect(refusalAction(refusal(Code.FailedPrecondition, "PAYOUT_FENCE_MISMATCH", { holder: "NEWER" }), "po-1").kind).toBe("newer-holder");
    expect(refusalAction(refusal(Code.FailedPrecondition, "PAYOUT_FENCE_MISMATCH", { holder: "OLDER" }), "po-1")).toMatchObject({
      kind: "needs-human",
      reason: "PAYOUT_FENCE_MISMATCH",
    });
  });

  it("a duplicate settles the reference it was sent under; PAYOUT_ALREADY_SUBMITTED settles the live one the proxy names", () => {
    expect(refusalAction(refusal(Code.AlreadyExists, "DUPLICATE_SUBMISSION"), "po-1:t5")).toEqual({
      kind: "settle",
      reference: "po-1:t5",
      reason: "DUPLICATE_SUBMISSION",
    });
    expect(refusalAction(refusal(Code.AlreadyExists, "PAYOUT_ALREADY_SUBMITTED", { live_submission: "po-1:t3" }), "po-1:t5")).toEqual({
      kind: "settle",
      reference: "po-1:t3",
      reason: "PAYOUT_ALREADY_SUBMITTED",
    });
  });

  it("RAIL_AMBIGUOUS is UNKNOWN and NOT_FORWARDED is a later attempt, never a resubmission of the same one", () => {
    expect(refusalAction(refusal(Code.Aborted, "RAIL_AMBIGUOUS"), "po-1")).toEqual({ kind: "unknown" });
    expect(refusalAction(refusal(Code.Aborted, "NOT_FORWARDED"), "po-1")).toEqual({ kind: "not-forwarded" });
  });

  it.each([
    [Code.PermissionDenied, "TOKEN_SIGNATURE_INVALID"],
    [Code.PermissionDenied, "PERMISSION_DENIED"],
    [Code.Unauthenticated, ""],
    [Code.FailedPrecondition, "BOUND_PAYOUT_NOT_FOUND"],
    [Code.FailedPrecondition, "PAYOUT_MISMATCH"],
  ] as Array<[Code, string]>)("%s %s cannot be cured by a retry: a human's", (code, reason) => {
    expect(refusalAction(reason ? refusal(code, reason) : new ConnectError("no", code), "po-1").kind).toBe("needs-human");
  });

  it("a payout closed meanwhile is left alone; step 0's refusal fails it, naming the field", () => {
    expect(refusalAction(refusal(Code.FailedPrecondition, "PAYOUT_NOT_PAYABLE", { state: "PAID" }), "po-1")).toEqual({ kind: "closed", state: "PAID" });
    expect(refusalAction(refusal(Code.InvalidArgument, "FIELD_INVALID", { field: "beneficiary" }), "po-1")).toEqual({
      kind: "invalid",
      failureReason: "INVALID_PAYOUT:FIELD_INVALID:beneficiary",
    });
  });

  it("anything else is a lost answer: ask before doing anything", () => {
    expect(refusalAction(new ConnectError("boom", Code.Unavailable), "po-1")).toMatchObject({ kind: "lost" });
    expect(refusalAction(new ConnectError("late", Code.DeadlineExceeded), "po-1")).toMatchObject({ kind: "lost" });
    expect(refusalAction(new Error("socket hang up"), "po-1")).toMatchObject({ kind: "lost" });
  });
});
