import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { SubmissionSchema, SubmissionState } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { verdictFor } from "./submission-outcome.js";

const sub = (state: SubmissionState, over: { ambiguous?: boolean; railReference?: string; railReason?: string } = {}) =>
  create(SubmissionSchema, { payoutId: "po-1", state, ...over });

describe("what a proxy submission means for the payout", () => {
  it("ACCEPTED and RESOLVED_PAID are PAID with the rail reference", () => {
    expect(verdictFor(sub(SubmissionState.ACCEPTED, { railReference: "rr_1" }))).toEqual({
      kind: "record",
      write: { state: "PAID", railReference: "rr_1", failureReason: null },
    });
    expect(verdictFor(sub(SubmissionState.RESOLVED_PAID, { railReference: "rr_2" }))).toMatchObject({ write: { state: "PAID", railReference: "rr_2" } });
  });

  it("REJECTED is FAILED with the rail's reason", () => {
    expect(verdictFor(sub(SubmissionState.REJECTED, { railReason: "INJECTED_REJECT" }))).toMatchObject({
      write: { state: "FAILED", failureReason: "INJECTED_REJECT" },
    });
  });

  it("RESOLVED_NOT_PAID is FAILED", () => {
    expect(verdictFor(sub(SubmissionState.RESOLVED_NOT_PAID))).toMatchObject({ write: { state: "FAILED", failureReason: "RESOLVED_NOT_PAID" } });
  });

  it("TIMEOUT and stale FORWARDING are UNKNOWN, never a reason to resubmit", () => {
    expect(verdictFor(sub(SubmissionState.TIMEOUT))).toMatchObject({ write: { state: "UNKNOWN" } });
    expect(verdictFor(sub(SubmissionState.FORWARDING, { ambiguous: true }))).toMatchObject({ write: { state: "UNKNOWN" } });
  });

  it("a FORWARDING row still in flight means wait", () => {
    expect(verdictFor(sub(SubmissionState.FORWARDING))).toEqual({ kind: "wait" });
  });
});
