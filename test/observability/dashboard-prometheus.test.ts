/**
 * The Grafana dashboard and the alert rules, evaluated by a real Prometheus (Debian's 2.42) that
 * scrapes a running mesh: every dashboard query parses and returns at least one series, every
 * query filters on the dashboard's namespace, every alert expression of files/alerts.yaml parses
 * and evaluates, and a planted fault (the only executor stopped) takes its alert to pending.
 *
 * Prometheus scrapes each /metrics port of the mesh every second as job <fullname>-<component>
 * (the ServiceMonitor's job names) with namespace="test" added to every target, and evaluates the
 * rules every second. The rules are files/alerts.yaml with RELEASE_NAMESPACE -> test and nothing
 * else changed: `for:` is left as shipped, because the state checked is "pending" (the condition
 * holds, the `for:` clock runs), which Prometheus reports from the first evaluation on.
 *
 * Negative controls: a query naming a metric that does not exist is reported as returning no
 * series; a query without the namespace filter is reported; a query that does not parse is
 * reported; the fault's alert is inactive before the fault.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { freePort } from "../../tools/harness/ports.js";
import { connectClient, eventually, expectRejected, proxyClient } from "../support/clients.js";
import { startFullMesh } from "../support/test-mesh.js";
import { letTimePass } from "../support/time.js";
import { chartDir } from "../helm/helm-tool.js";
import { type DashboardQuery, dashboardQueries, namespaceViolations, readDashboard, substitute } from "./dashboard-queries.js";

/**
 * Labelled must-be-zero counters: a labelled series exists only from its first event, which a
 * healthy mesh never has (an executor fenced out by a newer holder, a rail answer after its
 * submission was resolved). A query over one of them alone may return nothing; instead Prometheus
 * must know the family from the scrape (/api/v1/metadata: a target exported its # TYPE line), so a
 * misspelt name still fails. The dashboard shows 0 for them (noValue).
 */
const EVENT_ONLY_FAMILIES = ["railfence_executor_fenced_out_total", "railfence_rail_proxy_late_answers_total"];

const NAMESPACE = "test";
const FULLNAME = "rf-railfence";
const dashboardPath = join(chartDir, "files", "dashboards", "railfence.json");
const dashboard = readDashboard(dashboardPath);
const queries = dashboardQueries(dashboard);
const alertRules = (
  parse(readFileSync(join(chartDir, "files", "alerts.yaml"), "utf8").replaceAll("RELEASE_NAMESPACE", NAMESPACE)) as {
    groups: Array<{ name: string; rules: Array<{ alert: string; expr: string }> }>;
  }
).groups.flatMap((g) => g.rules);

let mesh: Mesh;
let prometheus: ChildProcess | undefined;
let promUrl = "";
let workDir = "";

interface PromResponse {
  status: "success" | "error";
  error?: string;
  data?: {
    result?: unknown[];
    alerts?: Array<{ labels: Record<string, string>; state: string }>;
    groups?: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }>;
  };
}

async function promGet(path: string, params: Record<string, string> = {}): Promise<PromResponse> {
  const res = await fetch(`${promUrl}${path}?${new URLSearchParams(params)}`);
  return (await res.json()) as PromResponse;
}

/** What is wrong with one query against the running Prometheus: undefined when it parses and returns series. */
async function queryProblem(expr: string): Promise<string | undefined> {
  const r = await promGet("/api/v1/query", { query: expr });
  if (r.status !== "success") return `does not evaluate: ${r.error}`;
  if ((r.data?.result ?? []).length === 0) return "returns no series";
  return undefined;
}

/** True when a scraped target exported the family (its HELP/TYPE), samples or not. */
async function familyScraped(name: string): Promise<boolean> {
  const r = (await promGet("/api/v1/metadata", { metric: name })) as { data?: Record<string, unknown[]> };
  return (r.data?.[name] ?? []).length > 0;
}

const isEventOnly = (q: DashboardQuery) => EVENT_ONLY_FAMILIES.find((m) => new RegExp(`\\b${m}\\b`).test(q.expr));
const query = (q: DashboardQuery) => substitute(q.expr, { namespace: NAMESPACE, rateInterval: "1m", interval: "1s", range: "1h" });
const label = (q: DashboardQuery) => `${q.panel} [${q.refId}]`;

beforeAll(async () => {
  mesh = await startFullMesh({ reconcileIntervalMs: 500 });

  workDir = mkdtempSync(join(tmpdir(), "railfence-prometheus-"));
  const jobs = new Map<string, string[]>();
  for (const p of mesh.processes()) {
    if (!p.ready?.metricsPort) continue;
    const job = `${FULLNAME}-${p.name.replace(/-[0-9]+$/, "")}`;
    jobs.set(job, [...(jobs.get(job) ?? []), `127.0.0.1:${p.ready.metricsPort}`]);
  }
  writeFileSync(join(workDir, "alerts.yml"), readFileSync(join(chartDir, "files", "alerts.yaml"), "utf8").replaceAll("RELEASE_NAMESPACE", NAMESPACE));
  const config = {
    global: { scrape_interval: "1s", scrape_timeout: "1s", evaluation_interval: "1s" },
    rule_files: [join(workDir, "alerts.yml")],
    scrape_configs: [...jobs].map(([job, targets]) => ({ job_name: job, static_configs: [{ targets, labels: { namespace: NAMESPACE } }] })),
  };
  writeFileSync(join(workDir, "prometheus.yml"), JSON.stringify(config));
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn(
    "prometheus",
    [
      `--config.file=${join(workDir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(workDir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  prometheus.stderr?.on("data", (d) => (stderr += d));
  prometheus.once("error", (err) => (stderr += `spawn failed (.ci/run installs Debian's prometheus package): ${err.message}`));
  await eventually(
    async () => {
      if (prometheus?.exitCode !== null) throw new Error(`prometheus exited: ${stderr}`);
      return (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.ok;
    },
    "prometheus ready",
    30_000,
  );

  // Traffic: payouts to PAID, and one submission refused for naming no payout (a binding refusal).
  const payouts = connectClient(PayoutService, mesh.payouts!.url);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const req = { accountId: `acc-dash-${i}`, amount: { amountMinor: 100n + BigInt(i), currency: "EUR" }, beneficiary: "ben-dash" };
    const { payout } = await payouts.createPayout(req, { headers: { "idempotency-key": randomUUID() } });
    ids.push(payout!.payoutId);
  }
  for (const id of ids) await eventually(async () => (await payouts.getPayout({ payoutId: id })).payout?.state === 3, `payout ${id} PAID`);
  await expectRejected(
    proxyClient(mesh.proxies[0]!.url).submitPayout({
      accountId: "acc-dash-rogue",
      payoutId: "po-dash-made-up",
      fencingToken: 9n,
      amount: { amountMinor: 100n, currency: "EUR" },
      beneficiary: "ben-dash",
    }),
    Code.FailedPrecondition,
    "BOUND_PAYOUT_NOT_FOUND",
  );
  // Scraped: the payouts are in Prometheus, with the two samples a rate needs.
  await eventually(
    async () => {
      const r = await promGet("/api/v1/query", { query: `sum(railfence_executor_payouts_total{namespace="${NAMESPACE}", outcome="paid"}) >= 3` });
      if ((r.data?.result ?? []).length === 0) return false;
      const b = await promGet("/api/v1/query", { query: `railfence_rail_proxy_binding_refusals_total{namespace="${NAMESPACE}"}` });
      return (b.data?.result ?? []).length > 0;
    },
    "prometheus scraped the paid payouts",
    30_000,
  );
  // rate() and increase() need two samples after a counter moved: three more 1 s scrapes.
  await letTimePass(3_000, "three more scrapes after the counters moved");
}, 180_000);

afterAll(async () => {
  if (prometheus?.pid && prometheus.exitCode === null) {
    const exited = new Promise((r) => prometheus!.once("exit", r));
    process.kill(prometheus.pid, "SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    if (prometheus.exitCode === null) process.kill(prometheus.pid, "SIGKILL");
  }
  await mesh?.stop();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

describe("dashboard queries against a real Prometheus", () => {
  it("the dashboard has queries, a prometheus datasource variable and a namespace variable", () => {
    expect(queries.length).toBeGreaterThan(20);
    const vars = dashboard.templating?.list ?? [];
    expect(vars.find((v) => v.name === "datasource")).toMatchObject({ type: "datasource", query: "prometheus" });
    expect(vars.find((v) => v.name === "namespace")).toMatchObject({ type: "query" });
    const raw = JSON.parse(readFileSync(dashboardPath, "utf8"));
    expect(raw.schemaVersion).toBe(39);
    const panels = raw.panels.flatMap((p: any) => [p, ...(p.panels ?? [])]);
    expect(new Set(panels.map((p: any) => p.id)).size).toBe(panels.length);
    for (const p of panels.filter((x: any) => x.type !== "row")) {
      expect(p.datasource, p.title).toEqual({ type: "prometheus", uid: "${datasource}" });
      for (const t of p.targets) expect(t.datasource, `${p.title} ${t.refId}`).toEqual({ type: "prometheus", uid: "${datasource}" });
    }
  });

  it('every query filters every metric it reads on namespace="$namespace"', () => {
    const problems = queries.flatMap((q) => namespaceViolations(q.expr).map((p) => `${label(q)}: ${p}`));
    expect(problems).toEqual([]);
  });

  it("every query parses and returns at least one series", async () => {
    const problems: string[] = [];
    for (const q of queries) {
      const p = await queryProblem(query(q));
      if (!p) continue;
      const family = isEventOnly(q);
      if (family && p === "returns no series" && (await familyScraped(family))) continue;
      problems.push(`${label(q)}: ${p}: ${query(q)}`);
    }
    expect(problems).toEqual([]);
  });

  it("a query naming a metric that does not exist is reported (negative control)", async () => {
    const missing = `sum by (namespace) (rate(railfence_executor_payouts_totl{namespace="$namespace", outcome="paid"}[$__rate_interval]))`;
    expect(await queryProblem(substitute(missing, { namespace: NAMESPACE }))).toBe("returns no series");
    // The same query spelt right passes: the checker is not simply failing everything.
    expect(await queryProblem(substitute(missing.replace("_totl", "_total"), { namespace: NAMESPACE }))).toBeUndefined();
  });

  it("the no-event-yet allowance still needs the family exported: a misspelt one is not (negative control)", async () => {
    for (const f of EVENT_ONLY_FAMILIES) expect(await familyScraped(f), f).toBe(true);
    expect(await familyScraped("railfence_executor_fenced_outs_total")).toBe(false);
  });

  it("a query that does not parse, and one without the namespace filter, are reported (negative controls)", async () => {
    expect(await queryProblem("sum by (namespace (up)")).toMatch(/^does not evaluate: /);
    expect(namespaceViolations('sum(rate(railfence_rail_proxy_fenced_out_total{outcome="x"}[5m])) / sum(up{namespace="$namespace"})')).toEqual([
      'railfence_rail_proxy_fenced_out_total: not filtered on namespace="$namespace"',
    ]);
    expect(namespaceViolations('max(process_resident_memory_bytes) + max(up{namespace="$namespace"})')).toEqual([
      'process_resident_memory_bytes: not filtered on namespace="$namespace"',
    ]);
  });
});

describe("alert rules against the same Prometheus", () => {
  it("every alert expression of files/alerts.yaml (RELEASE_NAMESPACE -> test) parses", async () => {
    expect(alertRules.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const a of alertRules) {
      const r = await promGet("/api/v1/query", { query: a.expr });
      if (r.status !== "success") problems.push(`${a.alert}: ${r.error}`);
    }
    expect(problems).toEqual([]);
  });

  it("Prometheus loaded every alert and evaluates each without error", async () => {
    const rules = await eventually(
      async () => {
        const r = await promGet("/api/v1/rules", { type: "alert" });
        const all = (r.data?.groups ?? []).flatMap((g) => g.rules);
        return all.length === alertRules.length && all.every((x) => x.health !== "unknown") ? all : false;
      },
      "every rule evaluated once",
      20_000,
    );
    expect(rules.map((r) => r.name).sort()).toEqual(alertRules.map((a) => a.alert).sort());
    expect(rules.filter((r) => r.health !== "ok").map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);
  });

  it("stopping the only executor takes ExecutorMetricsAbsent to pending (inactive before: the control)", async () => {
    const active = async () =>
      ((await promGet("/api/v1/alerts")).data?.alerts ?? []).filter((a) => a.labels.alertname === "ExecutorMetricsAbsent" && a.labels.namespace === NAMESPACE);
    expect(await active()).toEqual([]);
    await mesh.executors[0]!.stop();
    const [alert] = await eventually(
      async () => {
        const a = await active();
        return a.length > 0 ? a : false;
      },
      "ExecutorMetricsAbsent pending",
      30_000,
    );
    expect(["pending", "firing"]).toContain(alert!.state);
    expect(alert!.labels.severity).toBe("page");
  });
});
