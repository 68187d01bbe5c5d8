/**
 * The optional monitoring objects beside the ServiceMonitor and PrometheusRule (decision 059): a
 * PodMonitor, Google Cloud Managed Service for Prometheus (PodMonitoring per component, Rules) and
 * the Grafana dashboards ConfigMap. Each renders nothing by default, renders a valid object
 * (k8s-validate.ts: no unknown field) selecting this release's pods when enabled, and the GMP
 * Rules carry every alert of files/alerts.yaml with the release's namespace in place of the
 * placeholder. Negative controls: a planted unknown field, a missing alert and both scrape
 * configs at once are each caught.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { chartDir, helm } from "./helm-tool.js";
import { validateObject } from "./k8s-validate.js";
import { byKind, podSpecs, render, templateArgs, type K8sObject } from "./render.js";

const MONITORING_KINDS = ["PodMonitor", "PodMonitoring", "Rules", "ConfigMap"];
const NAMESPACE = "payments-eu";

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const alertGroups = (parse(readFileSync(join(chartDir, "files", "alerts.yaml"), "utf8")) as { groups: Array<{ name: string; rules: AlertRule[] }> }).groups;

const monitoringObjects = (objects: K8sObject[]) =>
  objects.filter((o) => MONITORING_KINDS.includes(o.kind) && (o.kind !== "ConfigMap" || o.metadata.name.endsWith("-dashboards")));

/** Names of the alerts in Rules objects, per group, with their expressions. */
function rulesAlerts(rules: K8sObject[]): Map<string, AlertRule & { group: string }> {
  const out = new Map<string, AlertRule & { group: string }>();
  for (const r of rules) for (const g of r.spec.groups) for (const rule of g.rules) out.set(rule.alert, { ...rule, group: g.name });
  return out;
}

/** Problems of a Rules object against files/alerts.yaml (empty = every alert there, namespace substituted). */
function rulesViolations(rules: K8sObject[], namespace: string): string[] {
  const got = rulesAlerts(rules);
  const out: string[] = [];
  for (const g of alertGroups) {
    for (const want of g.rules) {
      const have = got.get(want.alert);
      if (!have) {
        out.push(`${want.alert}: missing`);
        continue;
      }
      if (have.group !== g.name) out.push(`${want.alert}: in group ${have.group}, want ${g.name}`);
      const expr = want.expr.replaceAll("RELEASE_NAMESPACE", namespace);
      if (have.expr !== expr) out.push(`${want.alert}: expr differs from files/alerts.yaml with the namespace substituted`);
      if (have.expr.includes("RELEASE_NAMESPACE")) out.push(`${want.alert}: placeholder left in expr`);
      if ((have.for ?? "") !== (want.for ?? "")) out.push(`${want.alert}: for ${have.for}, want ${want.for}`);
      if (!isDeepStrictEqual(have.labels, want.labels)) out.push(`${want.alert}: labels differ`);
      if (!isDeepStrictEqual(have.annotations, JSON.parse(JSON.stringify(want.annotations).replaceAll("RELEASE_NAMESPACE", namespace))))
        out.push(`${want.alert}: annotations differ`);
    }
  }
  return out;
}

describe("monitoring objects: disabled by default", () => {
  it("the default values render no PodMonitor, PodMonitoring, Rules or dashboards ConfigMap", () => {
    expect(monitoringObjects(render()).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([]);
  });
});

describe("PodMonitor", () => {
  const objects = render({ set: ["podMonitor.enabled=true", "podMonitor.interval=15s", "podMonitor.labels.team=payments"], namespace: NAMESPACE });
  const [pm] = byKind(objects, "PodMonitor");

  it("is valid and selects this release's pods, in its namespace, on the port named metrics", async () => {
    expect(byKind(objects, "PodMonitor")).toHaveLength(1);
    expect(await validateObject(pm!)).toEqual([]);
    expect(pm!.spec.selector.matchLabels).toEqual({ "app.kubernetes.io/name": "railfence", "app.kubernetes.io/instance": "rf" });
    expect(pm!.spec.namespaceSelector.matchNames).toEqual([NAMESPACE]);
    expect(pm!.spec.podMetricsEndpoints).toEqual([expect.objectContaining({ port: "metrics", path: "/metrics", interval: "15s" })]);
    expect(pm!.metadata.labels).toMatchObject({ release: "kube-prometheus-stack", team: "payments" });
  });

  it("every pod template it selects with a metrics port names that port metrics, and the selector matches it", () => {
    const withMetrics = podSpecs(objects).filter((p) => p.spec.containers.some((c: any) => (c.ports ?? []).some((port: any) => port.name === "metrics")));
    expect(withMetrics.map((p) => p.component).sort()).toEqual(expect.arrayContaining(["executor", "lock", "payouts", "rail-proxy"]));
    for (const p of withMetrics) {
      const labels = p.owner.kind === "CronJob" ? p.owner.spec.jobTemplate.spec.template.metadata.labels : p.owner.spec.template.metadata.labels;
      for (const [k, v] of Object.entries(pm!.spec.selector.matchLabels)) expect(labels[k], `${p.component} ${k}`).toBe(v);
    }
  });

  it("sets job to <fullname>-<component>, the ServiceMonitor's job, so RailProxyReplicasLow's job matcher still selects rail-proxy", () => {
    const [relabel] = pm!.spec.podMetricsEndpoints[0].relabelings;
    expect(relabel).toEqual({ sourceLabels: ["__meta_kubernetes_pod_label_app_kubernetes_io_component"], targetLabel: "job", replacement: "rf-railfence-$1" });
    const services = byKind(render({ set: ["serviceMonitor.enabled=true"] }), "Service").map((s) => s.metadata.name);
    expect(services).toContain("rf-railfence-rail-proxy");
    expect(/^.+-rail-proxy$/.test(relabel.replacement.replace("$1", "rail-proxy"))).toBe(true);
  });

  it("is refused together with the ServiceMonitor (every pod would be scraped twice)", () => {
    const r = helm(templateArgs({ set: ["podMonitor.enabled=true", "serviceMonitor.enabled=true"] }));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("serviceMonitor.enabled and podMonitor.enabled are both true");
  });

  it("a planted unknown field is caught by the validator (negative control)", async () => {
    const broken = structuredClone(pm!);
    broken.spec.podMetricsEndpoints[0].metricRelabelling = [];
    expect(await validateObject(broken)).toEqual(["PodMonitor/rf-railfence: spec.podMetricsEndpoints[].metricRelabelling: unknown field"]);
  });
});

describe("Google Cloud Managed Service for Prometheus", () => {
  const objects = render({ set: ["googleManagedPrometheus.enabled=true", "railStub.enabled=true", "rail.credential=dev"], namespace: NAMESPACE });
  const podMonitorings = byKind(objects, "PodMonitoring");
  const rules = byKind(objects, "Rules");

  it("renders valid objects only", async () => {
    expect((await Promise.all([...podMonitorings, ...rules].map(validateObject))).flat()).toEqual([]);
    for (const o of [...podMonitorings, ...rules]) expect(o.apiVersion).toBe("monitoring.googleapis.com/v1");
  });

  it("one PodMonitoring per component with a metrics port, named like its Service (the job label), on port metrics", () => {
    const components = podMonitorings.map((o) => o.spec.selector.matchLabels["app.kubernetes.io/component"]).sort();
    expect(components).toEqual(["executor", "lock", "payouts", "rail-proxy", "rail-stub", "reconciler"]);
    for (const o of podMonitorings) {
      const c = o.spec.selector.matchLabels["app.kubernetes.io/component"];
      expect(o.metadata.name).toBe(`rf-railfence-${c}`);
      expect(o.spec.selector.matchLabels).toMatchObject({ "app.kubernetes.io/name": "railfence", "app.kubernetes.io/instance": "rf" });
      expect(o.spec.endpoints).toEqual([{ port: "metrics", path: "/metrics", scheme: "http", interval: "30s" }]);
    }
    // Each selector matches the pods of exactly its component.
    for (const p of podSpecs(objects).filter((x) => x.spec.containers.some((c: any) => (c.ports ?? []).some((port: any) => port.name === "metrics")))) {
      const pmFor = podMonitorings.filter((o) => o.spec.selector.matchLabels["app.kubernetes.io/component"] === p.component);
      expect(pmFor, p.component).toHaveLength(1);
    }
  });

  it("Rules carry every alert of files/alerts.yaml, in its group, with the release's namespace substituted", () => {
    expect(rules).toHaveLength(1);
    expect(rulesViolations(rules, NAMESPACE)).toEqual([]);
    const total = alertGroups.reduce((n, g) => n + g.rules.length, 0);
    expect(rulesAlerts(rules).size).toBe(total);
    for (const g of rules[0]!.spec.groups) expect(g.interval, g.name).toBe("30s");
    expect(JSON.stringify(rules[0])).not.toContain("RELEASE_NAMESPACE");
    expect(rules[0]!.spec.groups.map((g: any) => g.name)).toEqual(alertGroups.map((g) => g.name));
  });

  it("a Rules object missing an alert, or with the placeholder left, is caught (negative control)", () => {
    const missing = structuredClone(rules[0]!);
    const dropped = missing.spec.groups[0].rules.pop();
    expect(rulesViolations([missing], NAMESPACE)).toEqual([`${dropped.alert}: missing`]);
    const raw = structuredClone(rules[0]!);
    raw.spec.groups[0].rules[0].expr = alertGroups[0]!.rules[0]!.expr;
    expect(rulesViolations([raw], NAMESPACE)).toEqual([
      `${alertGroups[0]!.rules[0]!.alert}: expr differs from files/alerts.yaml with the namespace substituted`,
      `${alertGroups[0]!.rules[0]!.alert}: placeholder left in expr`,
    ]);
  });

  it("the rules can be left out (scrape only), and the rule interval is settable", () => {
    expect(byKind(render({ set: ["googleManagedPrometheus.enabled=true", "googleManagedPrometheus.rules.enabled=false"] }), "Rules")).toEqual([]);
    const [r] = byKind(render({ set: ["googleManagedPrometheus.enabled=true", "googleManagedPrometheus.rules.interval=1m"] }), "Rules");
    for (const g of r!.spec.groups) expect(g.interval).toBe("1m");
  });
});

describe("Grafana dashboards ConfigMap", () => {
  const dashboardFiles = readdirSync(join(chartDir, "files", "dashboards")).filter((f) => f.endsWith(".json"));
  const configMap = (set: string[]) =>
    byKind(render({ set: ["dashboards.enabled=true", ...set] }), "ConfigMap").find((o) => o.metadata.name === "rf-railfence-dashboards");

  it("holds every JSON file under files/dashboards, unchanged, with the sidecar's label", async () => {
    const cm = configMap([]);
    expect(cm).toBeDefined();
    expect(await validateObject(cm!)).toEqual([]);
    expect(dashboardFiles.length).toBeGreaterThan(0);
    expect(Object.keys(cm!.data).sort()).toEqual([...dashboardFiles].sort());
    for (const f of dashboardFiles) {
      expect(cm!.data[f]).toBe(readFileSync(join(chartDir, "files", "dashboards", f), "utf8").replace(/\n$/, ""));
      expect(() => JSON.parse(cm!.data[f])).not.toThrow();
    }
    expect(cm!.metadata.labels?.grafana_dashboard).toBe("1");
    expect(cm!.metadata).not.toHaveProperty("namespace");
  });

  it("the label, annotations and namespace follow the sidecar's settings", () => {
    const cm = configMap([
      "dashboards.labels.grafana_dashboard=null",
      "dashboards.labels.dash=railfence",
      "dashboards.annotations.grafana_folder=Payments",
      "dashboards.namespace=monitoring",
    ]);
    expect(cm!.metadata.labels?.grafana_dashboard).toBeUndefined();
    expect(cm!.metadata.labels?.dash).toBe("railfence");
    expect(cm!.metadata.annotations).toEqual({ grafana_folder: "Payments" });
    expect((cm!.metadata as any).namespace).toBe("monitoring");
  });

  it("the schema refuses a namespace that is not a DNS label (negative control for the values path)", () => {
    const r = helm(templateArgs({ set: ["dashboards.enabled=true", "dashboards.namespace=Not_A_Namespace"] }));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("dashboards.namespace");
  });
});
