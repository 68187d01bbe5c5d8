/**
 * The queries of a Grafana dashboard JSON, as Prometheus would receive them: every panel target's
 * `expr` (rows' nested panels included), with Grafana's variables replaced by fixed values. Also a
 * static check that every metric a query reads is filtered on the dashboard's namespace: a panel
 * without it would add up every release's series sharing the Prometheus.
 */
import { readFileSync } from "node:fs";

export interface DashboardQuery {
  panel: string;
  refId: string;
  expr: string;
}

interface Panel {
  title?: string;
  panels?: Panel[];
  targets?: Array<{ expr?: string; refId?: string }>;
}

/** Every target expression of the dashboard, in panel order. */
export function dashboardQueries(dashboard: { panels?: Panel[] }): DashboardQuery[] {
  const out: DashboardQuery[] = [];
  const walk = (panels: Panel[] | undefined) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ panel: p.title ?? "(untitled)", refId: t.refId ?? "?", expr: t.expr });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  return out;
}

export function readDashboard(path: string): { panels?: Panel[]; templating?: { list: Array<{ name: string; type: string; query?: unknown }> } } {
  return JSON.parse(readFileSync(path, "utf8"));
}

/** Values for Grafana's variables; the built-ins get what a dashboard over a short range would. */
export interface Substitutions {
  namespace: string;
  rateInterval?: string;
  interval?: string;
  range?: string;
}

/** The query Prometheus receives: `$namespace`/`${namespace}`, `$__rate_interval`, `$__interval`, `$__range`, `$datasource`. */
export function substitute(expr: string, s: Substitutions): string {
  return expr
    .replaceAll(/\$\{?__rate_interval\}?/g, s.rateInterval ?? "1m")
    .replaceAll(/\$\{?__interval\}?/g, s.interval ?? "15s")
    .replaceAll(/\$\{?__range\}?/g, s.range ?? "1h")
    .replaceAll(/\$\{?namespace\}?/g, s.namespace)
    .replaceAll(/\$\{?datasource\}?/g, "prometheus");
}

/** Not metric names: PromQL's aggregation operators (they may be followed by `by (...)`, not `(`) and keywords. */
const KEYWORDS = new Set([
  "sum",
  "min",
  "max",
  "avg",
  "count",
  "group",
  "stddev",
  "stdvar",
  "topk",
  "bottomk",
  "quantile",
  "count_values",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "and",
  "or",
  "unless",
  "offset",
  "bool",
  "atan2",
  "inf",
  "nan",
]);

/**
 * Metric names an expression reads, each with whether its selector carries `namespace="$namespace"`.
 * A small PromQL scanner, enough for dashboard queries: strings, label lists after by/without/on/
 * ignoring/group_*, range and subquery brackets, function names and keywords are set aside; what
 * is left of the identifiers are metric names, with or without a `{...}` selector.
 */
export function metricSelectors(expr: string): Array<{ metric: string; namespaced: boolean }> {
  const out: Array<{ metric: string; namespaced: boolean }> = [];
  // Label lists of grouping modifiers hold label names, not metrics.
  let rest = expr.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " $1 ");
  rest = rest.replace(/\[[^\]]*\]/g, " ");
  const selector = /([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}/g;
  rest = rest.replace(selector, (_m, metric: string | undefined, matchers: string) => {
    const namespaced = /(^|,)\s*namespace\s*=\s*"\$\{?namespace\}?"/.test(matchers);
    out.push({ metric: metric ?? "{}", namespaced });
    return " ";
  });
  rest = rest.replace(/"(?:[^"\\]|\\.)*"/g, " ");
  for (const m of rest.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (call || KEYWORDS.has(name!) || /^[0-9]/.test(name!)) continue;
    out.push({ metric: name!, namespaced: false });
  }
  return out;
}

/** Problems of one query: a metric read without the namespace filter. */
export function namespaceViolations(expr: string): string[] {
  return metricSelectors(expr)
    .filter((s) => !s.namespaced)
    .map((s) => `${s.metric}: not filtered on namespace="$namespace"`);
}
