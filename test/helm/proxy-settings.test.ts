/**
 * rail-proxy's and the reconciler's money-safety settings in the chart (SPEC C3 §3.9): the proxy
 * gets its admission timeout and pre-forward budget, the reconciler the proxy's own deadline,
 * margin and admission timeout from the same values. The chart refuses at render time exactly
 * the combinations the services refuse at start (checked against their config code), and every
 * guard is on in the rendered pod, as the proxy builds them (productionGuards).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readConfig as readProxyConfig } from "../../services/rail-proxy/config.js";
import { productionGuards } from "../../services/rail-proxy/guards.js";
import { readConfig as readReconcilerConfig } from "../../services/reconciler/config.js";
import { helm } from "./helm-tool.js";
import { containerEnv, renderedSecrets } from "./pod-env.js";
import { podSpecs, render, templateArgs } from "./render.js";

const MINIMAL = ["rail.url=https://rail.example.com", "rail.existingSecret=rail-cred", "rail.egress.cidrs={203.0.113.0/24}"];
const SECRETS = { "rail-cred": { credential: "rk_test" } };
const dir = mkdtempSync(join(tmpdir(), "railfence-chart-env-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The env each service would start with, from a rendering (secret files materialized). */
function envs(set: string[]): { proxy: Record<string, string>; reconciler: Record<string, string> } {
  const objects = render({ set: [...MINIMAL, ...set] });
  const pods = podSpecs(objects);
  const of = (name: string) => {
    const p = pods.find((x) => x.component === name)!;
    return containerEnv(p.spec, p.spec.containers[0], { ...SECRETS, ...renderedSecrets(objects) }, mkdtempSync(join(dir, `${name}-`)));
  };
  return { proxy: of("rail-proxy"), reconciler: of("reconciler") };
}

const defaults = envs([]);

describe("chart: rail-proxy and reconciler timing", () => {
  it("gives rail-proxy its timing and the reconciler the same deadline, margin and admission timeout", () => {
    const { proxy, reconciler } = envs([
      "railProxy.railDeadlineMs=4000",
      "railProxy.ambiguityMarginMs=3000",
      "railProxy.admissionTimeoutMs=2500",
      "railProxy.forwardBudgetMs=1000",
      "reconciler.contradictionWatchMs=1209600000",
      "reconciler.unrecordedPaymentWatchMs=172800000",
    ]);
    expect(proxy).toMatchObject({ RAIL_DEADLINE_MS: "4000", AMBIGUITY_MARGIN_MS: "3000", ADMISSION_TIMEOUT_MS: "2500", RAIL_FORWARD_BUDGET_MS: "1000" });
    expect(reconciler).toMatchObject({
      RAIL_DEADLINE_MS: "4000",
      AMBIGUITY_MARGIN_MS: "3000",
      ADMISSION_TIMEOUT_MS: "2500",
      SETTLEMENT_WINDOW_MS: "3600000",
      CONTRADICTION_WATCH_MS: "1209600000",
      UNRECORDED_PAYMENT_WATCH_MS: "172800000",
    });
    const p = readProxyConfig(proxy);
    const r = readReconcilerConfig(reconciler);
    expect([p.railDeadlineMs, p.ambiguityMarginMs, p.admissionTimeoutMs, p.forwardBudgetMs]).toEqual([4000, 3000, 2500, 1000]);
    expect([r.settlementWindowMs, r.contradictionWatchMs, r.unrecordedWatchMs]).toEqual([3600000, 1209600000, 172800000]);
    // The clocks' allowances: the proxy's against paydb, the reconciler's added to the window.
    expect([readProxyConfig(defaults.proxy).clockSkewAllowanceMs, readReconcilerConfig(defaults.reconciler).clockSkewAllowanceMs]).toEqual([100, 1000]);
  });

  it("the defaults start both services with every guard on (the proxy's own reading of its env)", () => {
    const config = readProxyConfig(defaults.proxy);
    expect(productionGuards(config)).toEqual({
      forwardBudgetMs: 2000,
      connectedSession: true,
      sendGate: true,
      wallClock: true,
      clockSkewAllowanceMs: 100,
    });
    expect(readReconcilerConfig(defaults.reconciler).contradictionWatchMs).toBe(7 * 86_400_000);
    expect(readReconcilerConfig(defaults.reconciler).unrecordedWatchMs).toBe(86_400_000);
  });

  // [values, the env they would give] — the chart must refuse exactly what the services refuse.
  const cases: Array<[string, string[], Record<string, string>, Record<string, string>]> = [
    ["the defaults", [], {}, {}],
    ["budget = margin", ["railProxy.forwardBudgetMs=5000"], { RAIL_FORWARD_BUDGET_MS: "5000" }, {}],
    ["budget = margin - 1", ["railProxy.forwardBudgetMs=4999"], { RAIL_FORWARD_BUDGET_MS: "4999" }, {}],
    ["a smaller margin under the default budget", ["railProxy.ambiguityMarginMs=2000"], { AMBIGUITY_MARGIN_MS: "2000" }, { AMBIGUITY_MARGIN_MS: "2000" }],
    [
      "margin 0",
      ["railProxy.ambiguityMarginMs=0", "railProxy.forwardBudgetMs=1"],
      { AMBIGUITY_MARGIN_MS: "0", RAIL_FORWARD_BUDGET_MS: "1" },
      { AMBIGUITY_MARGIN_MS: "0" },
    ],
    ["window = 2 x deadline + margin + admission", ["reconciler.settlementWindowMs=20000"], {}, { SETTLEMENT_WINDOW_MS: "20000" }],
    ["window = 2 x deadline + margin + admission + 1", ["reconciler.settlementWindowMs=20001"], {}, { SETTLEMENT_WINDOW_MS: "20001" }],
    [
      "a long admission timeout past the window",
      ["railProxy.admissionTimeoutMs=600000", "reconciler.settlementWindowMs=300000"],
      { ADMISSION_TIMEOUT_MS: "600000" },
      { ADMISSION_TIMEOUT_MS: "600000", SETTLEMENT_WINDOW_MS: "300000" },
    ],
    ["window 0", ["reconciler.settlementWindowMs=0"], {}, { SETTLEMENT_WINDOW_MS: "0" }],
    ["skew allowance = half the budget", ["railProxy.clockSkewAllowanceMs=1000"], { CLOCK_SKEW_ALLOWANCE_MS: "1000" }, {}],
    ["skew allowance just below half the budget", ["railProxy.clockSkewAllowanceMs=999"], { CLOCK_SKEW_ALLOWANCE_MS: "999" }, {}],
    ["skew allowance 0", ["railProxy.clockSkewAllowanceMs=0"], { CLOCK_SKEW_ALLOWANCE_MS: "0" }, {}],
  ];

  it.each(cases)("%s: the chart renders it if and only if both services accept it", (_, set, proxyEnv, reconcilerEnv) => {
    const chart = helm(templateArgs({ set: [...MINIMAL, ...set] }));
    let services = true;
    try {
      readProxyConfig({ ...defaults.proxy, ...proxyEnv });
      readReconcilerConfig({ ...defaults.reconciler, ...reconcilerEnv });
    } catch (err) {
      expect((err as Error).name).toBe("ConfigError");
      services = false;
    }
    expect(chart.status === 0, chart.stderr).toBe(services);
    if (!services) expect(chart.stderr).toMatch(/forwardBudgetMs|ambiguityMarginMs|settlementWindowMs|clockSkewAllowanceMs/);
  });

  it("says why: the budget against the margin, the window against the sum", () => {
    expect(helm(templateArgs({ set: [...MINIMAL, "railProxy.forwardBudgetMs=5000"] })).stderr).toContain(
      "railProxy.forwardBudgetMs (5000) must be below railProxy.ambiguityMarginMs (5000)",
    );
    expect(helm(templateArgs({ set: [...MINIMAL, "reconciler.settlementWindowMs=20000"] })).stderr).toContain(
      "reconciler.settlementWindowMs (20000) must be greater than 2 x railProxy.railDeadlineMs + ambiguityMarginMs + admissionTimeoutMs (20000)",
    );
  });
});
