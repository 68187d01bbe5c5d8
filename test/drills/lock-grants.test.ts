/**
 * The etcd quorum drill's lock checks on planted grant histories: what they must flag, and the
 * overlaps they must not (two holders' intervals overlap whenever a call is slow to come back).
 * These are the checks' negative controls without a cluster; etcd-quorum-fork is the one with.
 */
import { describe, expect, it } from "vitest";
import { grantsWithoutQuorum, tokenOrderViolations, type ExecutorAttempt, type Grant, type ProbeCall } from "../../tools/harness/drills/lock-grants.js";
import { checkLock, LOCK_NO_QUORUM_GRANT, LOCK_TOKEN_ORDER } from "../../tools/harness/drills/quorum-checks.js";

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

describe("the quorum drill's verdict on the lock", () => {
  const window = { lostAt: 1000, backAt: 2000, healedAt: 2500 };
  const probe = (token: number | undefined, askedAt: number, answeredAt: number, refused = "LOCK_BACKEND_UNAVAILABLE"): ProbeCall =>
    token === undefined ? { key: "account:a", askedAt, answeredAt, refused } : { key: "account:a", askedAt, answeredAt, token: BigInt(token) };
  /** Grants before and after the outage, refusals inside it: what a lock that fails closed shows. */
  const healthy = (): ProbeCall[] => [
    probe(10, 0, 10),
    probe(12, 100, 110),
    probe(undefined, 1100, 1300),
    probe(undefined, 1400, 1600),
    probe(undefined, 1700, 1900),
    probe(20, 2600, 2610),
  ];

  it("passes a lock that refused every call without quorum and whose tokens went up", () => {
    const v = checkLock(healthy(), [], window);
    expect(v.violations).toEqual([]);
    expect(v.failures).toEqual([]);
    expect(v.counts.proberRefusedWithoutQuorum).toBe(3);
  });

  it("flags tokens a split member repeats after the cluster is back (the fork control's history)", () => {
    const split = [...healthy(), probe(30, 1200, 1210), probe(31, 1300, 1310), probe(13, 2700, 2710)];
    const v = checkLock(split, [], window);
    expect(v.violations.map((x) => x.invariant)).toContain(LOCK_TOKEN_ORDER);
    expect(v.violations.filter((x) => x.invariant === LOCK_NO_QUORUM_GRANT)).toHaveLength(2);
  });

  it("counts an executor's grant inside the window against the lock too", () => {
    const attempts: ExecutorAttempt[] = [{ key: "account:a", askedAt: 1200, answeredAt: 1500, source: "executor-1", token: 15n }];
    expect(checkLock(healthy(), attempts, window).violations.map((x) => x.invariant)).toEqual([LOCK_NO_QUORUM_GRANT]);
  });

  it("fails when the outage was not exercised, or was answered with something else than unavailable", () => {
    const few = healthy().filter((c) => !(c.token === undefined && c.askedAt === 1700));
    expect(checkLock(few, [], window).failures.join()).toContain("not exercised");
    const held = [...healthy(), probe(undefined, 1500, 1550, "LOCK_HELD")];
    expect(checkLock(held, [], window).failures.join()).toContain("refused LOCK_HELD while there was no quorum");
  });

  it("fails when the prober saw no grant on one side of the outage (it could not tell)", () => {
    const blind = healthy().filter((c) => c.answeredAt > window.lostAt);
    expect(checkLock(blind, [], window).failures.join()).toContain("cannot tell");
  });
});
