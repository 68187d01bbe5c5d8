/**
 * The etcd quorum drill's lock checks on planted grant histories: what they must flag, and the
 * overlaps they must not (two holders' intervals overlap whenever a call is slow to come back).
 */
import { describe, expect, it } from "vitest";
import { grantsWithoutQuorum, tokenOrderViolations, type Grant } from "../../tools/harness/drills/lock-grants.js";

const g = (token: number, askedAt: number, answeredAt: number, key = "account:a"): Grant => ({
  key,
  token: BigInt(token),
  askedAt,
  answeredAt,
  source: `s${token}`,
});

describe("token order over grants seen", () => {
  it("passes tokens that go up in real time, and overlapping calls in any token order", () => {
    expect(tokenOrderViolations([g(10, 0, 5), g(12, 20, 30), g(11, 21, 40), g(15, 100, 110)])).toEqual([]);
  });

  it("flags a grant asked for after a higher one was answered", () => {
    const problems = tokenOrderViolations([g(10, 0, 5), g(20, 10, 15), g(19, 30, 35)]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("token 19");
  });

  it("flags a token handed out twice, even to overlapping calls", () => {
    expect(tokenOrderViolations([g(10, 0, 50), g(10, 10, 20)]).join()).toContain("handed out twice");
  });

  it("compares tokens per key only", () => {
    expect(tokenOrderViolations([g(20, 0, 5, "account:a"), g(10, 30, 35, "account:b")])).toEqual([]);
  });

  it("gives the clock a few ms of slack, no more", () => {
    expect(tokenOrderViolations([g(20, 0, 10), g(10, 12, 20)])).toEqual([]);
    expect(tokenOrderViolations([g(20, 0, 10), g(10, 40, 50)])).toHaveLength(1);
  });
});

describe("grants without quorum", () => {
  it("flags only grants asked for and answered inside the window", () => {
    const flagged = grantsWithoutQuorum([g(1, 90, 110), g(2, 110, 150), g(3, 150, 210), g(4, 205, 230)], 100, 200);
    expect(flagged.map((x) => x.token)).toEqual([2n]);
  });
});
