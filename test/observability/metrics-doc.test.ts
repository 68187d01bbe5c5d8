/**
 * docs/metrics.md is what tools/generate-metrics-doc.ts makes of the metric definitions under
 * services/ (CI's drift check regenerates it too), and the scanner cannot silently skip a metric
 * it does not understand. test/observability/metric-names.test.ts checks the other direction:
 * every family a running mesh exports is listed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { METRICS_DOC, renderDoc, scanServices, scanSource } from "../../tools/generate-metrics-doc.js";

const ROOT = join(import.meta.dirname, "../..");

describe("docs/metrics.md", () => {
  it("is up to date with the metric definitions (npm run generate)", () => {
    expect(readFileSync(join(ROOT, METRICS_DOC), "utf8")).toBe(renderDoc(scanServices()));
  });

  it("lists every railfence metric once, with its type and labels", () => {
    const defs = scanServices();
    expect(defs.length).toBeGreaterThanOrEqual(50);
    expect(new Set(defs.map((d) => d.name)).size).toBe(defs.length);
    expect(defs.find((d) => d.name === "railfence_rail_proxy_late_answers_total")).toMatchObject({ type: "counter", labels: ["previous_state"] });
    expect(defs.find((d) => d.name === "railfence_rpc_permission_denied_total")).toMatchObject({ labels: ["rpc_service", "rpc_method"] });
  });

  it("the scanner reads literals, consts and labelled definitions, and refuses what it cannot read (negative control)", () => {
    const source = [
      'const name = "railfence_lock_example_total";',
      'new Counter({ name, help: "An example" + " split", labelNames: ["a", "b"] as const, registers });',
      'new Histogram<"x">({ name: "railfence_lock_example_seconds", help: "h", buckets: [1, 2] });',
    ].join("\n");
    expect(scanSource("services/lock/x.ts", source)).toEqual([
      { name: "railfence_lock_example_total", type: "counter", labels: ["a", "b"], help: "An example split", file: "services/lock/x.ts" },
      { name: "railfence_lock_example_seconds", type: "histogram", labels: [], help: "h", file: "services/lock/x.ts" },
    ]);
    expect(() => scanSource("services/lock/y.ts", 'new Gauge({ name: prefix + "x", help: "h" });')).toThrow(
      /services\/lock\/y.ts:1: the metric's name and help/,
    );
    expect(() => scanSource("services/lock/z.ts", "new Gauge(options);")).toThrow(/without an object literal/);
  });
});
