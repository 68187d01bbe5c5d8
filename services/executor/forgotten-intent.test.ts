import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { PaymentSchema, PaymentStatus } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import { forgottenIntentVerdict } from "./forgotten-intent.js";

const lostAt = new Date("2026-12-03T10:00:00Z");
const ctx = { settlementWindowMs: 60_000, clockSkewAllowanceMs: 1000 };
const at = (ms: number) => new Date(lostAt.getTime() + ms);
const payment = (status: PaymentStatus, ref = "po-1") =>
  create(PaymentSchema, { railReference: `rr_${ref}_${status}`, clientReference: ref, status, bookedAt: timestampFromDate(lostAt) });

describe("what the rail's statement says about a submission paydb forgot", () => {
  it("one accepted payment: paid, even before the window has passed", () => {
    expect(forgottenIntentVerdict([payment(PaymentStatus.ACCEPTED)], at(1000), lostAt, ctx)).toMatchObject({ kind: "paid" });
  });

  it("nothing, and the statement is complete past the window and the allowance: not paid", () => {
    expect(forgottenIntentVerdict([], at(61_000), lostAt, ctx)).toEqual({ kind: "not-paid" });
  });

  it("nothing yet, the statement not complete that far (by the allowance alone): wait", () => {
    expect(forgottenIntentVerdict([], at(60_999), lostAt, ctx)).toEqual({ kind: "wait", until: at(61_000) });
  });

  it("only a rejection: the same as nothing (no money moved), judged once the window has passed", () => {
    expect(forgottenIntentVerdict([payment(PaymentStatus.REJECTED)], at(30_000), lostAt, ctx).kind).toBe("wait");
    expect(forgottenIntentVerdict([payment(PaymentStatus.REJECTED)], at(61_000), lostAt, ctx).kind).toBe("not-paid");
  });

  it("two payments, or a status nobody documents: a human", () => {
    expect(forgottenIntentVerdict([payment(PaymentStatus.ACCEPTED), payment(PaymentStatus.ACCEPTED, "po-1:t7")], at(61_000), lostAt, ctx).kind).toBe("human");
    expect(forgottenIntentVerdict([payment(7 as PaymentStatus)], at(61_000), lostAt, ctx).kind).toBe("human");
  });
});
