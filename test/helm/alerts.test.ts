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
const EXTERNAL_METRICS = new Set([
  "up",
  "kube_deployment_status_replicas_available",
  "kube_job_status_failed",
  "kube_cronjob_status_last_successful_time",
  "kube_cronjob_created",
]);
const PROMQL_WORDS = new Set([
  "sum",
  "min",
  "max",
  "count",
  "rate",
  "increase",
  "absent",
  "or",
  "and",
  "unless",
  "by",
  "without",
  "vector",
  "clamp_min",
  "on",
  "ignoring",
  "offset",
  "time",
]);

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

/** Identifiers that are metric names: not functions/keywords, not inside {...} or [...], not grouping labels (by (...), on (...)). */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/"[^"]*"/g, "")
    .replace(/\boffset\s+\d+[smhdwy]\b/g, "")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "");
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
    ["RailDuplicateSubmissionAttempted", /increase\(railfence_rail_proxy_duplicate_attempted_total\{namespace="RELEASE_NAMESPACE"\}\[5m\]\)\) > 0/, "page"],
    ["RailProxyFencingDisabled", /min by \(namespace\) \(railfence_rail_proxy_fencing_enabled\{namespace="RELEASE_NAMESPACE"\}\) < 1/, "page"],
    ["RailProxyPaydbNotDurable", /min by \(namespace\) \(railfence_rail_proxy_paydb_durable\{namespace="RELEASE_NAMESPACE"\}\) < 1/, "page"],
    [
      "RailAmbiguousSubmissionUnresolved",
      /max by \(namespace\) \(railfence_rail_proxy_ambiguous_oldest_age_seconds\{namespace="RELEASE_NAMESPACE"\}\) > \d+/,
      undefined,
    ],
    ["RailProxyFencedOutSpike", /rate\(railfence_rail_proxy_fenced_out_total\{namespace="RELEASE_NAMESPACE"\}\[5m\]\)/, undefined],
    ["RailProxyRailErrorRate", /railfence_rail_proxy_rail_outcomes_total\{namespace="RELEASE_NAMESPACE", outcome=~"timeout\|refused"\}/, undefined],
    [
      "RailProxyReplicasLow",
      /^\(sum by \(namespace\) \(up\{namespace="RELEASE_NAMESPACE", job=~"\.\+-rail-proxy"\}\) or 0 \* absent\(up\{namespace="RELEASE_NAMESPACE", job=~"\.\+-rail-proxy"\}\)\) < 2$/,
      "page",
    ],
    ["PayoutLimitStoreUnavailable", /increase\(railfence_payouts_limit_store_unavailable_total\{namespace="RELEASE_NAMESPACE"\}\[5m\]\)\) > 0/, "page"],
    ["PayoutLimitRefusalsHigh", /rate\(railfence_payouts_limit_refusals_total\{namespace="RELEASE_NAMESPACE"\}\[10m\]\)/, "ticket"],
    // Issue 12: late answers, contradictions, binding refusals, guards, payouts held for a human.
    [
      "RailLateAnswerAfterResolution",
      /increase\(railfence_rail_proxy_late_answers_total\{namespace="RELEASE_NAMESPACE", previous_state!="timeout"\}\[15m\]\)\) > 0/,
      "page",
    ],
    [
      "RailResolutionContradicted",
      /increase\(railfence_reconciler_contradicted_total\{namespace="RELEASE_NAMESPACE"\}\[15m\]\)\) > 0.*increase\(railfence_rail_proxy_contradictions_recorded_total\{namespace="RELEASE_NAMESPACE"\}\[15m\]\)\) > 0/,
      "page",
    ],
    ["ReconcilerPaidButFailed", /increase\(railfence_reconciler_paid_but_failed_total\{namespace="RELEASE_NAMESPACE"\}\[15m\]\)\) > 0/, "page"],
    ["ReconcilerPaymentsWithoutIntent", /increase\(railfence_reconciler_payments_without_intent_total\{namespace="RELEASE_NAMESPACE"\}\[15m\]\)\) > 0/, "page"],
    [
      "RailProxyBindingRefusedCallerMisbehaviour",
      /railfence_rail_proxy_binding_refusals_total\{namespace="RELEASE_NAMESPACE", reason=~"payout_already_submitted\|payout_not_found\|payout_mismatch"\}\[15m\]\)\) > 0/,
      "page",
    ],
    ["RailProxyGuardDisabled", /min by \(namespace, guard\) \(railfence_rail_proxy_guard_enabled\{namespace="RELEASE_NAMESPACE"\}\) < 1/, "page"],
    [
      "ExecutorPayoutNeedsAttentionMoneyAtRisk",
      /railfence_executor_needs_attention_total\{namespace="RELEASE_NAMESPACE", reason=~"late_rail_answer\|resolution_contradicted\|mark_ahead_of_lock\|fence_ahead_of_lock\|forgotten_submission\|payout_mismatch\|payout_not_found\|bound_payout_not_found"\}/,
      "page",
    ],
    [
      "ExecutorPayoutNeedsAttention",
      /railfence_executor_needs_attention_total\{namespace="RELEASE_NAMESPACE", reason!~"late_rail_answer\|resolution_contradicted\|mark_ahead_of_lock\|fence_ahead_of_lock\|forgotten_submission\|payout_mismatch\|payout_not_found\|bound_payout_not_found"\}/,
      "ticket",
    ],
    ["RailProxyNotForwarding", /increase\(railfence_rail_proxy_not_forwarded_total\{namespace="RELEASE_NAMESPACE"\}\[15m\]\)\) > 0/, "ticket"],
    ["RailLateAnswerAfterSweep", /railfence_rail_proxy_late_answers_total\{namespace="RELEASE_NAMESPACE", previous_state="timeout"\}/, "ticket"],
    ["RailProxyRequestSentLate", /increase\(railfence_rail_proxy_requests_sent_late_total\{namespace="RELEASE_NAMESPACE"\}\[1h\]\)\) > 0/, "ticket"],
    [
      "RailProxyStaleBindingRefusals",
      /railfence_rail_proxy_binding_refusals_total\{namespace="RELEASE_NAMESPACE", reason=~"payout_not_payable\|payout_fence_mismatch"\}/,
      "ticket",
    ],
    // One absent() per scraped component, scoped to the release's namespace (decision 055).
    ["RailProxyMetricsAbsent", /^absent\(railfence_rail_proxy_fencing_enabled\{namespace="RELEASE_NAMESPACE"\}\)$/, "page"],
    ["LockMetricsAbsent", /^absent\(railfence_lock_grants_total\{namespace="RELEASE_NAMESPACE"\}\)$/, "ticket"],
    ["PayoutsMetricsAbsent", /^absent\(railfence_payouts_created_total\{namespace="RELEASE_NAMESPACE"\}\)$/, "page"],
    ["ExecutorMetricsAbsent", /^absent\(railfence_executor_payouts_in_flight\{namespace="RELEASE_NAMESPACE"\}\)$/, "page"],
    // Backlog and liveness (decisions 060, 061): max over the payouts replicas, never sum.
    [
      "PayoutBacklogOld",
      /^max by \(namespace, state\) \(railfence_payouts_backlog_oldest_age_seconds\{namespace="RELEASE_NAMESPACE", state=~"pending\|processing"\}\) > 1800$/,
      "page",
    ],
    [
      "ExecutorsAbsent",
      /^\(\(time\(\) - max by \(namespace\) \(railfence_executor_last_pass_timestamp_seconds\{namespace="RELEASE_NAMESPACE"\}\)\) > 300\) or absent\(railfence_executor_last_pass_timestamp_seconds\{namespace="RELEASE_NAMESPACE"\}\)$/,
      "page",
    ],
    [
      "ReconcilerNotPassing",
      /^\(time\(\) - max by \(namespace\) \(railfence_reconciler_last_pass_timestamp_seconds\{namespace="RELEASE_NAMESPACE"\}\)\) > 1800$/,
      "ticket",
    ],
    ["RailProxyDurabilityRefusals", /increase\(railfence_rail_proxy_not_durable_refusals_total\{namespace="RELEASE_NAMESPACE"\}\[15m\]\)\) > 0/, "ticket"],
    // The daily audit (templates/audit.yaml): a failed run pages, no success for 36 h is a ticket.
    ["RailfenceAuditFailed", /^max by \(namespace, job_name\) \(kube_job_status_failed\{namespace="RELEASE_NAMESPACE", job_name=~"[^"]+"\}\) > 0$/, "page"],
    [
      "RailfenceAuditNotSucceeding",
      /time\(\) - \(max by \(namespace, cronjob\) \(kube_cronjob_status_last_successful_time\{namespace="RELEASE_NAMESPACE", cronjob=~"[^"]+"\}\) or max by \(namespace, cronjob\) \(kube_cronjob_created\{namespace="RELEASE_NAMESPACE", cronjob=~"[^"]+"\}\)\)\) > 129600/,
      "ticket",
    ],
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

  it("a labelled must-be-zero counter also fires on its first event: the series appearing counts", () => {
    // increase() needs two samples of a series; a labelled counter is born at its first event
    // with value 1, so each page rule over one also fires while the series is new.
    for (const name of [
      "RailLateAnswerAfterResolution",
      "RailProxyBindingRefusedCallerMisbehaviour",
      "ExecutorPayoutNeedsAttentionMoneyAtRisk",
      "ExecutorPayoutNeedsAttention",
    ]) {
      const expr = byName.get(name)!.expr;
      const selector = /increase\(([a-z_]+\{[^}]*\})\[15m\]\)/.exec(expr)![1]!;
      expect(expr, name).toContain(`(${selector} unless ${selector} offset 15m)`);
    }
  });

  it("the money-at-risk and the ticket rules on railfence_executor_needs_attention_total split the reasons without overlap", () => {
    const set = (name: string) => /reason[=!]~"([^"]+)"/.exec(byName.get(name)!.expr)![1]!;
    expect(set("ExecutorPayoutNeedsAttentionMoneyAtRisk")).toBe(set("ExecutorPayoutNeedsAttention"));
    expect(byName.get("ExecutorPayoutNeedsAttentionMoneyAtRisk")!.expr).not.toContain("!~");
    expect(byName.get("ExecutorPayoutNeedsAttention")!.expr).not.toMatch(/reason=~/);
  });

  it("the checks fail on a broken rule (negative control)", () => {
    expect(balanced("sum(rate(x[5m])")).toBe(false);
    expect(metricNames('sum(rate(rail_proxy_no_such_total{a="b"}[5m]))')).toEqual(["rail_proxy_no_such_total"]);
    expect(serviceSources()).not.toContain('"rail_proxy_no_such_total"');
    expect(metricNames("x unless x offset 15m")).toEqual(["x", "x"]);
    expect(metricNames("max by (namespace, job_name) (kube_job_status_failed) > 0")).toEqual(["kube_job_status_failed"]);
    expect(metricNames("time() - max by (cronjob) (rail_proxy_no_such_seconds)")).toEqual(["rail_proxy_no_such_seconds"]);
  });

  /** A PromQL `=~` matcher as a JavaScript RegExp (Prometheus anchors both ends). */
  const matcher = (alert: string, label: string) => new RegExp(`^(?:${new RegExp(`${label}=~"([^"]+)"`).exec(byName.get(alert)!.expr)![1]!})$`);
  /** Names the CronJob controller gives a CronJob's Jobs: <cronjob>-<scheduled time in minutes>. */
  const jobNames = (cronJob: string) => [`${cronJob}-${Math.floor(Date.UTC(2030, 0, 2, 4, 23) / 60_000)}`, `${cronJob}-29000000`];

  it.each([
    ["default release", ["prometheusRule.enabled=true"], "rf"],
    ["another release name", ["prometheusRule.enabled=true"], "payments-eu"],
    ["fullnameOverride", ["prometheusRule.enabled=true", "fullnameOverride=pay"], "rf"],
  ])("the audit alerts select the audit CronJob's Jobs and nothing else (%s)", (_, set, release) => {
    const objects = render({ set, release });
    const cronJobs = objects.filter((o) => o.kind === "CronJob");
    const audit = cronJobs.find((o) => o.metadata.labels?.["app.kubernetes.io/component"] === "audit")!;
    const others = [...cronJobs.filter((o) => o !== audit).map((o) => o.metadata.name), ...objects.filter((o) => o.kind === "Job").map((o) => o.metadata.name)];
    expect(others.length).toBeGreaterThan(0);
    const failedJob = matcher("RailfenceAuditFailed", "job_name");
    for (const name of jobNames(audit.metadata.name)) expect(failedJob.test(name), name).toBe(true);
    for (const name of others.flatMap((o) => [o, ...jobNames(o)])) expect(failedJob.test(name), name).toBe(false);
    for (const label of ["cronjob"]) {
      const cron = matcher("RailfenceAuditNotSucceeding", label);
      expect(cron.test(audit.metadata.name)).toBe(true);
      for (const name of cronJobs.filter((o) => o !== audit).map((o) => o.metadata.name)) expect(cron.test(name), name).toBe(false);
    }
    // The rule's premise: one failed pod is one failed run (the Job never retries).
    expect(audit.spec.jobTemplate.spec.backoffLimit).toBe(0);
  });

  it("the audit alerts' selectors can fail (negative control): a renamed audit, or the reconciler's Jobs, do not match", () => {
    const failedJob = matcher("RailfenceAuditFailed", "job_name");
    expect(failedJob.test("rf-railfence-reconciler-29000000")).toBe(false);
    expect(failedJob.test("rf-railfence-check-29000000")).toBe(false);
    expect(failedJob.test("rf-railfence-audit")).toBe(false);
  });

  it("the PrometheusRule ships the rules in files/alerts.yaml with the release's namespace put in", () => {
    for (const namespace of ["payments", "staging"]) {
      const rule = render({ namespace, set: ["prometheusRule.enabled=true"] }).find((o) => o.kind === "PrometheusRule")!;
      expect(rule.spec).toEqual(parse(text.replaceAll("RELEASE_NAMESPACE", namespace)));
      expect(JSON.stringify(rule.spec)).not.toContain("RELEASE_NAMESPACE");
    }
  });
});
