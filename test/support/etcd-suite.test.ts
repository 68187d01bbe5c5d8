import { describe, expect, it } from "vitest";
import { etcdSuitePlan } from "./etcd-suite.js";

describe("etcd suites", () => {
  it("run with a binary, fail without one where CI requires etcd, and skip only elsewhere", () => {
    expect(etcdSuitePlan("/usr/bin/etcd", { RAILFENCE_REQUIRE_ETCD: "1" })).toBe("run");
    expect(etcdSuitePlan("/usr/bin/etcd", {})).toBe("run");
    expect(etcdSuitePlan(undefined, { RAILFENCE_REQUIRE_ETCD: "1" })).toBe("fail");
    expect(etcdSuitePlan(undefined, {})).toBe("skip");
  });
});
