import { describe, expect, it } from "vitest";
import { decide, type AmbiguousSubmission, type StatementEntry } from "./decide.js";

const created = new Date("2026-09-01T10:00:00Z");
const sub: AmbiguousSubmission = { payoutId: "po-1", accountId: "acc-1", amountMinor: 1050n, currency: "EUR", beneficiary: "ben-1", createdAt: created };
const entry = (over: Partial<StatementEntry> = {}): StatementEntry => ({
  railReference: "rr_1",
  clientReference: "po-1",
  accountId: "acc-1",
  beneficiary: "ben-1",
  amountMinor: 1050n,
  currency: "EUR",
  status: "ACCEPTED",
  reason: "",
  ...over,
});
const at = (ms: number) => new Date(created.getTime() + ms);
const WINDOW = 60_000;
const SKEW = 1000;
const settled = { now: at(WINDOW + SKEW + 1), coveredUntil: at(WINDOW + SKEW + 1), settlementWindowMs: WINDOW, clockSkewAllowanceMs: SKEW };
const early = { now: at(1000), coveredUntil: at(1000), settlementWindowMs: WINDOW, clockSkewAllowanceMs: SKEW };

describe("reconciler decision table", () => {
  it("one matching accepted payment means PAID with the rail's reference, even inside the window", () => {
    expect(decide(sub, [entry()], early)).toMatchObject({ decision: "PAID", railReference: "rr_1" });
  });

  it("entries for other payouts are ignored", () => {
    expect(decide(sub, [entry({ clientReference: "po-2" })], early)).toMatchObject({ decision: "WAIT" });
  });

  it("two accepted payments for one payout (a double payment) go to a human", () => {
    expect(decide(sub, [entry(), entry({ railReference: "rr_2" })], settled)).toMatchObject({ decision: "HUMAN" });
  });

  it.each([
    ["amount", { amountMinor: 1051n }],
    ["currency", { currency: "USD" }],
    ["account", { accountId: "acc-2" }],
    ["beneficiary", { beneficiary: "ben-2" }],
  ])("a payment with a different %s goes to a human, never PAID", (_what, over) => {
    expect(decide(sub, [entry(over)], settled)).toMatchObject({ decision: "HUMAN" });
  });

  it("a statement line with a status the rail protocol does not document goes to a human, never NOT_PAID (even beside a rejection)", () => {
    expect(decide(sub, [entry({ status: "UNKNOWN" })], settled)).toMatchObject({ decision: "HUMAN" });
    expect(decide(sub, [entry({ status: "REJECTED", railReference: "rr_0" }), entry({ status: "UNKNOWN" })], settled)).toMatchObject({ decision: "HUMAN" });
  });

  it("a rejected booking only means NOT_PAID with the rail's reason", () => {
    expect(decide(sub, [entry({ status: "REJECTED", reason: "INJECTED_REJECT" })], early)).toMatchObject({
      decision: "NOT_PAID",
      failureReason: "INJECTED_REJECT",
    });
  });

  it("an accepted payment wins over an earlier rejected one", () => {
    expect(decide(sub, [entry({ status: "REJECTED", railReference: "rr_0" }), entry()], settled)).toMatchObject({ decision: "PAID", railReference: "rr_1" });
  });

  it("absent and the window has passed and is covered: NOT_PAID", () => {
    expect(decide(sub, [], settled)).toMatchObject({ decision: "NOT_PAID", failureReason: "NOT_ON_RAIL_STATEMENT" });
  });

  it("an accepted payment of the same payout under another reference goes to a human, never NOT_PAID", () => {
    expect(decide(sub, [], settled, [entry({ clientReference: "po-1.retry", railReference: "rr_9" })])).toMatchObject({ decision: "HUMAN" });
    expect(decide(sub, [entry()], settled, [entry({ clientReference: "po-1:t7", railReference: "rr_9" })])).toMatchObject({ decision: "HUMAN" });
  });
  it("a rejected payment of the same payout under another reference does not matter", () => {
    expect(decide(sub, [], settled, [entry({ clientReference: "po-1:t7", status: "REJECTED" })])).toMatchObject({ decision: "NOT_PAID" });
  });
  it("absent while the window is open: WAIT", () => {
    expect(decide(sub, [], early)).toMatchObject({ decision: "WAIT" });
  });

  it("absent, window passed by our clock but the statement does not cover it yet: WAIT", () => {
    expect(decide(sub, [], { now: at(WINDOW * 2), coveredUntil: at(WINDOW - 1), settlementWindowMs: WINDOW, clockSkewAllowanceMs: SKEW })).toMatchObject({
      decision: "WAIT",
    });
  });

  it("absent, the window passed on every clock but not by the skew allowance: WAIT (a statement clock behind paydb's may not show it yet)", () => {
    const justPast = { now: at(WINDOW + SKEW - 1), coveredUntil: at(WINDOW + SKEW - 1), settlementWindowMs: WINDOW, clockSkewAllowanceMs: SKEW };
    expect(decide(sub, [], justPast)).toMatchObject({ decision: "WAIT" });
    expect(decide(sub, [], { ...justPast, clockSkewAllowanceMs: 0 }), "without the allowance the same moment is NOT_PAID").toMatchObject({
      decision: "NOT_PAID",
    });
  });

  it("absent, statement covers the window but our clock says it has not passed: WAIT", () => {
    expect(decide(sub, [], { now: at(WINDOW - 1), coveredUntil: at(WINDOW * 2), settlementWindowMs: WINDOW, clockSkewAllowanceMs: SKEW })).toMatchObject({
      decision: "WAIT",
    });
  });
});
