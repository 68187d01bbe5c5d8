/**
 * The harness runs each service with the heap limit the chart gives it (tools/harness/node-heap.ts),
 * so that what `npm start`, the drills and the bench measure is what the cluster runs.
 */
import { describe, expect, it } from "vitest";
import { NODE_HEAP_MB } from "../../tools/harness/node-heap.js";
import { containers, podSpecs, render } from "./render.js";

/** service (from the entrypoint dist/services/<service>/main.js) -> the chart's --max-old-space-size. */
function chartHeaps(set: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of podSpecs(render({ set }))) {
    for (const c of containers(p.spec)) {
      const cmd: string[] = c.command ?? [];
      const service = /^dist\/services\/([a-z0-9-]+)\/main\.js$/.exec(cmd.find((a) => a.startsWith("dist/")) ?? "")?.[1];
      const flag = cmd.find((a) => a.startsWith("--max-old-space-size="));
      if (service && flag) out[service] = Number(flag.split("=")[1]);
    }
  }
  return out;
}

describe("node heap limits", () => {
  it("are the chart's defaults for every service the chart runs, the development stub included", () => {
    const chart = chartHeaps(["railStub.enabled=true"]);
    expect(Object.keys(chart).sort()).toEqual(Object.keys(NODE_HEAP_MB).sort());
    expect(chart).toEqual(NODE_HEAP_MB);
  });

  it("follow the container's memory limit (a changed limit is a changed heap)", () => {
    expect(chartHeaps(["railStub.enabled=true", "railProxy.resources.limits.memory=1Gi"])["rail-proxy"]).toBe(1024 - 96);
  });
});
