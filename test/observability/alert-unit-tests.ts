/**
 * Runs promtool on the chart's alert rules exactly as `helm template` renders them for one
 * release namespace, against the committed unit tests in test/observability/alerts/<namespace>/,
 * and checks that those tests cover every alert (one firing case carrying the namespace, one
 * silent case). Decision 055.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { root } from "../helm/helm-tool.js";
import { render } from "../helm/render.js";

export const ALERT_TESTS_DIR = join(root, "test", "observability", "alerts");

export interface RuleGroups {
  groups: Array<{ name: string; rules: Array<{ alert?: string; expr: string; annotations?: Record<string, string>; [k: string]: unknown }> }>;
}

/** The PrometheusRule's spec as the chart renders it for a release in `namespace`. */
export function renderedRules(namespace: string): RuleGroups {
  const rule = render({ namespace, set: ["prometheusRule.enabled=true"] }).find((o) => o.kind === "PrometheusRule");
  if (!rule) throw new Error("the chart rendered no PrometheusRule");
  return rule.spec as RuleGroups;
}

export function alertNames(rules: RuleGroups): string[] {
  return rules.groups.flatMap((g) => g.rules.map((r) => r.alert).filter((a): a is string => Boolean(a)));
}

/**
 * promtool compares annotations too, and most of ours template {{ $value }}; the unit tests are
 * about when an alert fires and with which labels, so they run on the rendered rules with only
 * the annotations left out. `promtool check rules` still checks the full rendering (annotation
 * templates included).
 */
export function withoutAnnotations(rules: RuleGroups): RuleGroups {
  return { groups: rules.groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }) => r) })) };
}

export interface PromtoolResult {
  status: number;
  output: string;
}

export function promtool(args: string[], cwd: string): PromtoolResult {
  const r = spawnSync("promtool", args, { cwd, encoding: "utf8", timeout: 120_000 });
  if (r.error) throw new Error(`promtool could not run (.ci/run installs Debian's prometheus package): ${r.error.message}`);
  return { status: r.status ?? -1, output: `${r.stdout}${r.stderr}` };
}

/** Unit-test files committed for one release namespace. */
export function testFiles(namespace: string): string[] {
  return readdirSync(join(ALERT_TESTS_DIR, namespace))
    .filter((f) => f.endsWith(".yaml"))
    .sort();
}

/**
 * A temp dir holding `rules.yaml` (the given rules) and copies of the namespace's test files
 * (they name `rules.yaml`). `extra` adds or replaces test files by name. Remove it with cleanup().
 */
export function stage(namespace: string, rules: RuleGroups, extra: Record<string, string> = {}): { dir: string; files: string[]; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `alert-rules-${namespace}-`));
  writeFileSync(join(dir, "rules.yaml"), stringify(rules));
  for (const f of testFiles(namespace)) copyFileSync(join(ALERT_TESTS_DIR, namespace, f), join(dir, f));
  for (const [name, text] of Object.entries(extra)) writeFileSync(join(dir, name), text);
  const files = [...new Set([...testFiles(namespace), ...Object.keys(extra)])].sort();
  return { dir, files, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

interface AlertRuleTest {
  alertname: string;
  exp_alerts?: Array<{ exp_labels?: Record<string, string> }>;
}
interface UnitTestFile {
  tests: Array<{ name?: string; alert_rule_test?: AlertRuleTest[] }>;
}

/**
 * What the unit tests of `namespace` leave uncovered: for each alert, "no firing case" unless
 * some alert_rule_test expects it with every expected alert labelled namespace=<namespace>, and
 * "no silent case" unless some alert_rule_test expects nothing from it.
 */
export function coverageGaps(alerts: string[], namespace: string, texts: string[]): string[] {
  const firing = new Set<string>();
  const silent = new Set<string>();
  for (const text of texts) {
    for (const t of (parse(text) as UnitTestFile).tests ?? []) {
      for (const a of t.alert_rule_test ?? []) {
        const expected = a.exp_alerts ?? [];
        if (expected.length === 0) silent.add(a.alertname);
        else if (expected.every((e) => e.exp_labels?.namespace === namespace)) firing.add(a.alertname);
      }
    }
  }
  const gaps: string[] = [];
  for (const alert of alerts) {
    if (!firing.has(alert)) gaps.push(`${alert}: no firing case labelled namespace=${namespace}`);
    if (!silent.has(alert)) gaps.push(`${alert}: no silent case`);
  }
  return gaps;
}

export function readTestFiles(namespace: string): string[] {
  return testFiles(namespace).map((f) => readFileSync(join(ALERT_TESTS_DIR, namespace, f), "utf8"));
}
