/**
 * Every service's /metrics exposes the C4 §4.4 signals with the right Prometheus type, the
 * process defaults, and only bounded labels (never an account or payout id).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { connectClient, eventually } from "../support/clients.js";
import { startFullMesh } from "../support/test-mesh.js";

let mesh: Mesh;

const EXPECTED: Record<string, Record<string, "counter" | "gauge" | "histogram">> = {
  "rail-proxy-1": {
    railfence_rail_proxy_duplicate_attempted_total: "counter",
    railfence_rail_proxy_fenced_out_total: "counter",
    railfence_rail_proxy_admitted_total: "counter",
    railfence_rail_proxy_rail_outcomes_total: "counter",
    railfence_rail_proxy_ambiguous_submissions: "gauge",
    railfence_rail_proxy_ambiguous_oldest_age_seconds: "gauge",
    railfence_rail_proxy_fencing_enabled: "gauge",
    railfence_rail_proxy_admission_duration_seconds: "histogram",
    railfence_rail_proxy_rail_call_duration_seconds: "histogram",
  },
  lock: {
    railfence_lock_acquire_duration_seconds: "histogram",
    railfence_lock_grants_total: "counter",
    railfence_lock_contention_total: "counter",
    railfence_lock_leases_lost_total: "counter",
  },
  "executor-1": {
    railfence_executor_payout_end_to_end_duration_seconds: "histogram",
    railfence_executor_payouts_total: "counter",
    railfence_executor_lock_acquire_duration_seconds: "histogram",
  },
  payouts: {
    railfence_payouts_idempotency_replays_total: "counter",
    railfence_payouts_idempotency_conflicts_total: "counter",
    railfence_payouts_created_total: "counter",
  },
  reconciler: {
    railfence_reconciler_unresolved_submissions: "gauge",
    railfence_reconciler_unresolved_oldest_age_seconds: "gauge",
    railfence_reconciler_decisions_total: "counter",
  },
  "rail-stub": { railfence_rail_stub_payments_total: "counter" },
};

async function scrape(p: ServiceProcess): Promise<string> {
  return (await fetch(`http://127.0.0.1:${p.ready!.metricsPort}/metrics`)).text();
}

beforeAll(async () => {
  mesh = await startFullMesh({ reconcileIntervalMs: 500 });
  // Some traffic so labelled series exist.
  const payouts = connectClient(PayoutService, mesh.payouts!.url);
  const key = randomUUID();
  const req = { accountId: "acc-metrics-1", amount: { amountMinor: 100n, currency: "EUR" }, beneficiary: "ben-1" };
  const { payout } = await payouts.createPayout(req, { headers: { "idempotency-key": key } });
  await payouts.createPayout(req, { headers: { "idempotency-key": key } });
  await eventually(async () => (await payouts.getPayout({ payoutId: payout!.payoutId })).payout?.state === 3, "payout PAID");
});

afterAll(async () => {
  await mesh?.stop();
});

describe("metrics", () => {
  it("every C4 signal is exposed with its Prometheus type", async () => {
    for (const [name, metrics] of Object.entries(EXPECTED)) {
      const proc = mesh.processes().find((p) => p.name === name)!;
      expect(proc, name).toBeDefined();
      const text = await scrape(proc);
      for (const [metric, type] of Object.entries(metrics)) expect(text, `${name} ${metric}`).toContain(`# TYPE ${metric} ${type}`);
      expect(text, `${name} default metrics`).toContain("# TYPE process_cpu_user_seconds_total counter");
    }
  });

  it("fencing is reported enabled, and no label carries an account or payout id", async () => {
    const proxyText = await scrape(mesh.proxies[0]!);
    expect(proxyText).toMatch(/^railfence_rail_proxy_fencing_enabled\{[^}]*\} 1$/m);
    expect(proxyText).toMatch(/^railfence_rail_proxy_admitted_total\{[^}]*\} [1-9]/m);
    for (const p of mesh.processes()) {
      if (!p.ready?.metricsPort) continue;
      const text = await scrape(p);
      expect(text, p.name).not.toMatch(/acc-metrics-1|po_[a-z0-9]{10,}/);
    }
  });
});
