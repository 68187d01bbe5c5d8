/**
 * paydb's durability is declared, never guessed: the chart refuses to render without a
 * declaration, and rail-proxy gets exactly what was declared (it refuses to start without one,
 * and with synchronous-standby admits nothing while no synchronous standby is attached:
 * test/rail-proxy/paydb-durability.test.ts).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { helm } from "./helm-tool.js";
import { containers, podSpecs, render, templateArgs } from "./render.js";

const proxyEnv = (set: string[]) => {
  const pod = podSpecs(render({ set })).find((p) => p.component === "rail-proxy")!;
  return Object.fromEntries((containers(pod.spec)[0].env ?? []).map((e: any) => [e.name, e.value]));
};

describe("chart: paydb durability", () => {
  it("an undeclared durability is refused at render time, saying what to declare", () => {
    const r = helm(templateArgs({ set: ["database.paydb.durability="] }));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("database.paydb.durability must be declared: synchronous-standby, managed-ha or single-node");
  });

  it("negative control: declared, the same values render", () => {
    expect(helm(templateArgs({ set: ["database.paydb.durability=single-node"] })).status).toBe(0);
  });

  it("a value that is not a declaration is refused by the schema", () => {
    const r = helm(templateArgs({ set: ["database.paydb.durability=probably-fine"] }));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/durability/);
  });

  it.each(["single-node", "managed-ha", "synchronous-standby"])("rail-proxy is told %s", (declared) => {
    const env = proxyEnv([`database.paydb.durability=${declared}`]);
    expect(env.PAYDB_DURABILITY).toBe(declared);
  });

  it("the GKE and EKS examples declare managed-ha", () => {
    for (const f of ["values-gke.yaml", "values-eks.yaml"]) {
      const pod = podSpecs(render({ valuesFiles: [f], set: ["database.paydb.durability=managed-ha"] })).find((p) => p.component === "rail-proxy");
      expect(pod, f).toBeDefined();
    }
    for (const f of ["values-gke.yaml", "values-eks.yaml"]) {
      expect(readFileSync(new URL(`../../deploy/helm/railfence/${f}`, import.meta.url), "utf8")).toMatch(/^ {4}durability: managed-ha$/m);
    }
  });
});
