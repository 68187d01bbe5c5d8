/**
 * The chart's alert rules under promtool, as `helm template` renders them (decision 055):
 * `promtool check rules`, `promtool test rules` on the committed unit tests in alerts/<namespace>/,
 * every alert covered by a firing case (with its namespace) and a silent one, every selector and
 * aggregation scoped to the release's namespace, an "absent" rule per scraped component, and a
 * runbook section per alert. Each check has a negative control.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { root } from "../helm/helm-tool.js";
import { render } from "../helm/render.js";
import { alertNames, coverageGaps, promtool, readTestFiles, renderedRules, type RuleGroups, stage, withoutAnnotations } from "./alert-unit-tests.js";

const NAMESPACES = ["production", "staging"] as const;
const rendered = Object.fromEntries(NAMESPACES.map((ns) => [ns, renderedRules(ns)])) as Record<(typeof NAMESPACES)[number], RuleGroups>;
const alerts = alertNames(rendered.production);
const exprs = (rules: RuleGroups) => rules.groups.flatMap((g) => g.rules.map((r) => ({ alert: r.alert ?? "?", expr: r.expr })));

/** What `promtool test rules` says about one namespace's unit tests, with `extra` files staged too. */
function unitTests(namespace: (typeof NAMESPACES)[number], rules: RuleGroups, extra: Record<string, string> = {}, only?: string[]) {
  const s = stage(namespace, withoutAnnotations(rules), extra);
  try {
    return promtool(["test", "rules", ...(only ?? s.files)], s.dir);
  } finally {
    s.cleanup();
  }
}

describe("alert rules under promtool", () => {
  it.each(NAMESPACES)("promtool check rules accepts the rendering for %s (annotations included)", (ns) => {
    const s = stage(ns, rendered[ns]);
    try {
      const r = promtool(["check", "rules", "rules.yaml"], s.dir);
      expect(r.status, r.output).toBe(0);
      expect(r.output).toContain(`SUCCESS: ${alerts.length} rules found`);
    } finally {
      s.cleanup();
    }
  });

  it.each(NAMESPACES)("promtool test rules passes the unit tests for %s", (ns) => {
    const started = performance.now();
    const r = unitTests(ns, rendered[ns]);
    console.log(`promtool test rules (${ns}): ${Math.round(performance.now() - started)} ms`);
    expect(r.status, r.output).toBe(0);
    expect(r.output).not.toContain("FAILED");
  });

  it("every alert has a firing case labelled with its namespace and a silent case", () => {
    expect(alerts.length).toBeGreaterThanOrEqual(27);
    expect(coverageGaps(alerts, "production", readTestFiles("production"))).toEqual([]);
  });

  it("the coverage check fails on an alert without cases, and on a firing case without its namespace (negative control)", () => {
    expect(coverageGaps([...alerts, "RailfenceNoSuchAlert"], "production", readTestFiles("production"))).toEqual([
      "RailfenceNoSuchAlert: no firing case labelled namespace=production",
      "RailfenceNoSuchAlert: no silent case",
    ]);
    const unlabelled =
      "tests:\n  - alert_rule_test:\n      - alertname: X\n        exp_alerts:\n          - exp_labels: { severity: page }\n      - alertname: X\n";
    expect(coverageGaps(["X"], "production", [unlabelled])).toEqual(["X: no firing case labelled namespace=production"]);
  });

  it("a planted wrong expectation makes promtool test rules fail (negative control)", () => {
    const text = readFileSync(join(root, "test", "observability", "alerts", "production", "availability.yaml"), "utf8");
    // The cross-namespace case now claims staging fires instead of production.
    const planted = text.replace("exp_labels: { namespace: production, severity: page }", "exp_labels: { namespace: staging, severity: page }");
    expect(planted).not.toBe(text);
    const r = unitTests("production", rendered.production, { "availability.yaml": planted }, ["availability.yaml"]);
    expect(r.status).not.toBe(0);
    expect(r.output).toContain("production 0/2 rail-proxies up while staging has 2/2 pages for production");
  });

  it("the cross-namespace case fails on the rule before decision 055 (count over every namespace)", () => {
    const before = '(count(up{job=~".*rail-proxy.*"} == 1) or vector(0)) < 2';
    const rules = {
      groups: rendered.production.groups.map((g) => ({ ...g, rules: g.rules.map((r) => (r.alert === "RailProxyReplicasLow" ? { ...r, expr: before } : r)) })),
    };
    const r = unitTests("production", rules, {}, ["availability.yaml"]);
    expect(r.status).not.toBe(0);
    expect(r.output).toContain("production 0/2 rail-proxies up while staging has 2/2 pages for production");
  });

  it.each([
    // Liveness over every namespace: staging's passing executors hide production's stopped ones.
    [
      "ExecutorsAbsent",
      "(time() - max(railfence_executor_last_pass_timestamp_seconds)) > 300",
      "production's executors stop passing while staging's keep passing",
    ],
    // Summed over the payouts replicas: two replicas of a healthy 20-minute-old payout read as 40 minutes.
    [
      "PayoutBacklogOld",
      'sum by (namespace, state) (railfence_payouts_backlog_oldest_age_seconds{namespace="production", state=~"pending|processing"}) > 1800',
      "two payouts replicas reporting the same 17-minute-old payout stay silent (max, not sum)",
    ],
    [
      "ReconcilerNotPassing",
      "(time() - max(railfence_reconciler_last_pass_timestamp_seconds)) > 1800",
      "the reconciler's last pass gets old in production while staging's is fresh",
    ],
  ])("the backlog and liveness cases fail on a wrong %s rule (negative control)", (alert, wrong, testName) => {
    const rules = {
      groups: rendered.production.groups.map((g) => ({ ...g, rules: g.rules.map((r) => (r.alert === alert ? { ...r, expr: wrong } : r)) })),
    };
    const r = unitTests("production", rules, {}, ["backlog-liveness.yaml"]);
    expect(r.status, r.output).not.toBe(0);
    expect(r.output).toContain(testName);
  });
});

/** Selectors without namespace="<ns>", and aggregations that drop the namespace label. */
function scopeViolations(expr: string, namespace: string): string[] {
  const out: string[] = [];
  for (const m of expr.matchAll(/\{([^}]*)\}/g)) if (!m[1]!.includes(`namespace="${namespace}"`)) out.push(`selector without namespace: {${m[1]}}`);
  const bare = expr
    .replace(/\{[^}]*\}/g, "{}")
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\boffset\s+\d+[smhdwy]\b/g, "");
  for (const m of bare.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=[^a-zA-Z0-9_:\s({]|$)/g)) {
    if (!["or", "and", "unless"].includes(m[1]!)) out.push(`metric without a selector: ${m[1]}`);
  }
  for (const m of expr.matchAll(/\b(sum|min|max|count|avg)\s*\(/g)) out.push(`aggregation without by (namespace): ${m[0]}`);
  for (const m of expr.matchAll(/\bby\s*\(([^)]*)\)/g)) if (!/\bnamespace\b/.test(m[1]!)) out.push(`by (${m[1]}) drops namespace`);
  return out;
}

describe("alert rules are scoped to the release", () => {
  it.each(NAMESPACES)("every selector carries namespace=%s and every aggregation keeps it", (ns) => {
    const text = JSON.stringify(rendered[ns]);
    expect(text).not.toContain("RELEASE_NAMESPACE");
    for (const { alert, expr } of exprs(rendered[ns])) expect(scopeViolations(expr, ns), alert).toEqual([]);
  });

  it("the scope check catches an unscoped rule (negative control)", () => {
    expect(scopeViolations("sum(increase(x[5m])) > 0", "production")).toEqual(["metric without a selector: x", "aggregation without by (namespace): sum("]);
    expect(scopeViolations('min by (guard) (x{namespace="staging"}) < 1', "production")).toEqual([
      'selector without namespace: {namespace="staging"}',
      "by (guard) drops namespace",
    ]);
    expect(scopeViolations('sum by (namespace) (x{namespace="production"} unless x{namespace="production"} offset 15m) > 0', "production")).toEqual([]);
  });

  it("every component the ServiceMonitor scrapes has a namespace-scoped absent() rule", () => {
    // Development-only components (rail-stub) carry no money alerts.
    const ABSENT_RULE: Record<string, string> = {
      "rail-proxy": "RailProxyMetricsAbsent",
      lock: "LockMetricsAbsent",
      payouts: "PayoutsMetricsAbsent",
      executor: "ExecutorMetricsAbsent",
      "rail-stub": "",
    };
    for (const set of [[], ["payouts.service.type=LoadBalancer"], ["railStub.enabled=true"]]) {
      const scraped = render({ namespace: "production", set: ["serviceMonitor.enabled=true", ...set] })
        .filter((o) => o.kind === "Service" && (o.spec?.ports ?? []).some((p: { name: string }) => p.name === "metrics"))
        .map((o) => o.metadata.labels?.["app.kubernetes.io/component"] ?? "?");
      expect(scraped.length).toBeGreaterThanOrEqual(4);
      for (const component of scraped) {
        expect(component in ABSENT_RULE, `${component} is scraped but has no absent rule`).toBe(true);
        const rule = ABSENT_RULE[component];
        if (!rule) continue;
        expect(exprs(rendered.production).find((e) => e.alert === rule)?.expr, rule).toMatch(/^absent\([a-z_]+\{namespace="production"\}\)$/);
      }
    }
  });
});

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const m of markdown.matchAll(/^#{1,6}\s+(.+)$/gm))
    out.add(
      m[1]!
        .trim()
        .toLowerCase()
        .replace(/[^a-z0-9 _-]/g, "")
        .replace(/ /g, "-"),
    );
  return out;
}

function runbookGaps(rules: RuleGroups, markdown: string): string[] {
  const known = anchors(markdown);
  const gaps: string[] = [];
  for (const g of rules.groups)
    for (const r of g.rules) {
      const url = r.annotations?.runbook_url ?? "";
      const m = /\/docs\/runbooks\.md#([a-z0-9_-]+)$/.exec(url);
      if (!m) gaps.push(`${r.alert}: runbook_url ${url || "missing"} is not a docs/runbooks.md anchor`);
      else if (!known.has(m[1]!)) gaps.push(`${r.alert}: docs/runbooks.md has no section #${m[1]}`);
    }
  return gaps;
}

describe("runbooks", () => {
  const runbooks = readFileSync(join(root, "docs", "runbooks.md"), "utf8");

  it("every alert links its own section of docs/runbooks.md", () => {
    expect(runbookGaps(rendered.production, runbooks)).toEqual([]);
    for (const a of alerts) expect(anchors(runbooks).has(a.toLowerCase()), a).toBe(true);
  });

  it("the runbook check fails on a missing section or a link elsewhere (negative control)", () => {
    const rules: RuleGroups = {
      groups: [
        {
          name: "g",
          rules: [
            { alert: "A", expr: "x", annotations: { runbook_url: "https://github.com/railfence/railfence/blob/main/docs/runbooks.md#nosuchalert" } },
            { alert: "B", expr: "x", annotations: { runbook_url: "https://github.com/railfence/railfence/blob/main/docs/deploy.md#alerts" } },
            { alert: "C", expr: "x" },
          ],
        },
      ],
    };
    expect(runbookGaps(rules, runbooks)).toHaveLength(3);
  });
});
