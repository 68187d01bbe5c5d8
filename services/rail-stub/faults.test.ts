import { describe, expect, it } from "vitest";
import { FaultKind } from "../shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { FaultPlan, parseFaults } from "./faults.js";

describe("FaultPlan", () => {
  it("applies the first matching rule and uses up counted rules", () => {
    const plan = new FaultPlan();
    plan.replace([
      { kind: FaultKind.REJECT, latencyMs: 0, count: 2, clientReferencePrefix: "p-" },
      { kind: FaultKind.LATENCY, latencyMs: 5, count: 0, clientReferencePrefix: "" },
    ]);
    expect(plan.take("p-1")?.kind).toBe(FaultKind.REJECT);
    expect(plan.take("q-1")?.kind).toBe(FaultKind.LATENCY);
    expect(plan.take("p-2")?.kind).toBe(FaultKind.REJECT);
    expect(plan.take("p-3")?.kind).toBe(FaultKind.LATENCY);
    expect(plan.list()).toHaveLength(1);
  });

  it("parses the env form and rejects unknown kinds", () => {
    expect(parseFaults('[{"kind":"NEVER_LAND_HANG"}]')[0]).toMatchObject({ kind: FaultKind.NEVER_LAND_HANG, count: 0 });
    expect(() => parseFaults('[{"kind":"EXPLODE"}]')).toThrow(/unknown fault kind/);
  });
});
