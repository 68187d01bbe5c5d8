/**
 * files/alerts.yaml: parses, carries the required alerts (money-safety, rail, payouts limits), and each expression looks like
 * valid PromQL over metrics that the services really export (grep of services/).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { chartDir, root } from "./helm-tool.js";
import { render } from "./render.js";

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const text = readFileSync(join(chartDir, "files", "alerts.yaml"), "utf8");
const rules: Rule[] = (parse(text) as { groups: Array<{ name: string; rules: Rule[] }> }).groups.flatMap((g) => g.rules);
const byName = new Map(rules.map((r) => [r.alert, r]));

/** Metrics from outside railfence (Prometheus itself, kube-state-metrics). */
const EXTERNAL_METRICS = new Set(["up", "kube_deployment_status_replicas_available"]);
const PROMQL_WORDS = new Set(["sum", "min", "max", "count", "rate", "increase", "absent", "or", "and", "unless", "by", "without", "vector", "clamp_min", "on", "ignoring"]);

function serviceSources(dir = join(root, "services")): string {
  let out = "";
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (f === "gen") continue;
    if (statSync(p).isDirectory()) out += serviceSources(p);
    else if (f.endsWith(".ts")) out += readFileSync(p, "utf8");
  }
  return out;
}

/** Identifiers that are metric names: not functions/keywords, not inside {...} or [...]. */
function metricNames(expr: string): string[] {
  const stripped = expr.replace(/\{[^}]*\}/g, "").replace(/\[[^\]]*\]/g, "").replace(/"[^"]*"/g, "");
  return [...stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w));
}

function balanced(expr: string): boolean {
  const pairs: Record<string, string> = { ")": "(", "]": "[", "}": "{" };
  const stack: string[] = [];
  for (const ch of expr.replace(/"[^"]*"/g, "")) {
    if ("([{".includes(ch)) stack.push(ch);
    else if (ch in pairs && stack.pop() !== pairs[ch]) return false;
  }
  return stack.length === 0;
}

describe("alert rules", () => {
  it.each([
    ["RailDuplicateSubmissionAttempted", /increase\(rail_duplicate_attempted_total\[5m\]\)\) > 0/, "page"],
    ["RailProxyFencingDisabled", /min\(rail_proxy_fencing_enabled\) < 1/, "page"],
    ["RailAmbiguousSubmissionUnresolved", /max\(rail_ambiguous_oldest_age_seconds\) > \d+/, undefined],
    ["RailProxyFencedOutSpike", /rate\(rail_proxy_fenced_out_total\[5m\]\)/, undefined],
    ["RailProxyRailErrorRate", /rail_proxy_rail_outcome_total\{outcome=~"TIMEOUT\|REFUSED"\}/, undefined],
    ["RailProxyReplicasLow", /count\(up\{job=~"\.\*rail-proxy\.\*"\} == 1\).*< 2/, "page"],
    ["PayoutLimitStoreUnavailable", /increase\(payout_limit_store_unavailable_total\[5m\]\)\) > 0/, "page"],
    ["PayoutLimitRefusalsHigh", /rate\(payout_limit_refusals_total\[10m\]\)/, "ticket"],
  ])("%s is defined with the expected expression", (name, pattern, severity) => {
    const rule = byName.get(name);
    expect(rule, `${name} missing`).toBeDefined();
    expect(rule!.expr).toMatch(pattern);
    if (severity) expect(rule!.labels?.severity).toBe(severity);
  });

  it("every expression is balanced and reads only metrics that exist", () => {
    const sources = serviceSources();
    for (const r of rules) {
      expect(balanced(r.expr), `${r.alert}: unbalanced ${r.expr}`).toBe(true);
      expect(r.labels?.severity, r.alert).toMatch(/^(page|ticket)$/);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      if (r.for) expect(r.for).toMatch(/^\d+[smh]$/);
      const names = metricNames(r.expr);
      expect(names.length, r.alert).toBeGreaterThan(0);
      for (const m of names) if (!EXTERNAL_METRICS.has(m)) expect(sources, `${r.alert}: metric ${m} is not exported by services/`).toContain(`"${m}"`);
    }
  });

  it("the checks fail on a broken rule (negative control)", () => {
    expect(balanced("sum(rate(x[5m])")).toBe(false);
    expect(metricNames('sum(rate(rail_proxy_no_such_total{a="b"}[5m]))')).toEqual(["rail_proxy_no_such_total"]);
    expect(serviceSources()).not.toContain('"rail_proxy_no_such_total"');
  });

  it("the PrometheusRule ships exactly the rules in files/alerts.yaml", () => {
    const rule = render({ set: ["prometheusRule.enabled=true"] }).find((o) => o.kind === "PrometheusRule")!;
    expect(rule.spec).toEqual(parse(text));
  });
});
