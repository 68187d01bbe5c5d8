/**
 * Every /metrics endpoint of a running mesh (every component, traffic flowing) passes
 * `promtool check metrics` and follows the naming scheme of decision 057. Negative controls: the
 * old names, a gauge named like a counter, a `service` label and an upper-case label value are
 * each caught, by the scheme checker and (where promtool has a rule) by promtool.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { connectClient, eventually } from "../support/clients.js";
import { startFullMesh } from "../support/test-mesh.js";
import { scanServices } from "../../tools/generate-metrics-doc.js";
import { parseExposition, schemeViolations } from "./metric-scheme.js";

let mesh: Mesh;
const expositions = new Map<string, string>();

function checkMetrics(text: string): { status: number; output: string } {
  const r = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8", timeout: 60_000 });
  if (r.error) throw new Error(`promtool could not run (.ci/run installs Debian's prometheus package): ${r.error.message}`);
  return { status: r.status ?? -1, output: `${r.stdout}${r.stderr}` };
}

beforeAll(async () => {
  mesh = await startFullMesh({ reconcileIntervalMs: 500 });
  const payouts = connectClient(PayoutService, mesh.payouts!.url);
  const req = { accountId: "acc-names-1", amount: { amountMinor: 100n, currency: "EUR" }, beneficiary: "ben-1" };
  const { payout } = await payouts.createPayout(req, { headers: { "idempotency-key": randomUUID() } });
  // A refusal, so labelled error series exist too.
  await payouts.createPayout({ ...req, accountId: "" }, { headers: { "idempotency-key": randomUUID() } }).catch(() => undefined);
  await eventually(async () => (await payouts.getPayout({ payoutId: payout!.payoutId })).payout?.state === 3, "payout PAID");
  for (const p of mesh.processes()) {
    if (!p.ready?.metricsPort) continue;
    expositions.set(p.name, await (await fetch(`http://127.0.0.1:${p.ready.metricsPort}/metrics`)).text());
  }
});

afterAll(async () => {
  await mesh?.stop();
});

describe("metric names", () => {
  it("every component of the mesh has a /metrics endpoint", () => {
    expect([...expositions.keys()].sort()).toEqual(["executor-1", "lock", "payouts", "rail-proxy-1", "rail-stub", "reconciler"]);
  });

  it("promtool check metrics exits 0 on every endpoint", () => {
    for (const [name, text] of expositions) {
      const r = checkMetrics(text);
      expect(r.status, `${name}: ${r.output}`).toBe(0);
    }
  });

  it("every endpoint follows the naming scheme", () => {
    for (const [name, text] of expositions) expect(schemeViolations(text), name).toEqual([]);
  });

  it("every railfence family exported is listed in docs/metrics.md (generated from the definitions)", () => {
    const documented = new Set(scanServices().map((d) => d.name));
    for (const [name, text] of expositions) {
      const families = [...parseExposition(text).types.keys()].filter((f) => f.startsWith("railfence_"));
      expect(families.length, name).toBeGreaterThan(0);
      expect(
        families.filter((f) => !documented.has(f)),
        name,
      ).toEqual([]);
    }
  });

  it("a gauge named like a counter fails promtool and the scheme (negative control)", () => {
    const planted = '# HELP nodejs_active_handles_total x\n# TYPE nodejs_active_handles_total gauge\nnodejs_active_handles_total{component="lock"} 3\n';
    expect(checkMetrics(planted).status).not.toBe(0);
    expect(schemeViolations(planted)).toEqual(["nodejs_active_handles_total: a gauge named like a counter"]);
  });

  it("old names, a service label and upper-case values are caught (negative control)", () => {
    const planted = [
      "# HELP rail_duplicate_attempted_total x",
      "# TYPE rail_duplicate_attempted_total counter",
      'rail_duplicate_attempted_total{service="rail-proxy"} 0',
      "# HELP railfence_executor_payouts_total x",
      "# TYPE railfence_executor_payouts_total counter",
      'railfence_executor_payouts_total{component="executor",outcome="PAID"} 1',
      "# HELP railfence_lock_acquire x",
      "# TYPE railfence_lock_acquire histogram",
      'railfence_lock_acquire_count{component="lock"} 1',
      "",
    ].join("\n");
    expect(schemeViolations(planted)).toEqual([
      "rail_duplicate_attempted_total: not railfence_<component>_... (components: rail_proxy, executor, lock, payouts, reconciler, rail_stub, rpc, db)",
      "railfence_lock_acquire: a histogram without its unit (_seconds, _bytes, _size)",
      'rail_duplicate_attempted_total: label "service" (a ServiceMonitor sets it; ours is "component")',
      'rail_duplicate_attempted_total: no "component" label',
      'railfence_executor_payouts_total: label outcome="PAID" is not lower case',
    ]);
  });
});
