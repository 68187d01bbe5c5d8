/**
 * The ServiceMonitor and PrometheusRule carry the label a default kube-prometheus-stack selects
 * (`release: kube-prometheus-stack`), settable and removable through values (decision 055).
 */
import { describe, expect, it } from "vitest";
import { helm } from "./helm-tool.js";
import { render, templateArgs } from "./render.js";

const ENABLED = ["serviceMonitor.enabled=true", "prometheusRule.enabled=true"];
const monitoring = (set: string[]) => render({ set: [...ENABLED, ...set] }).filter((o) => o.kind === "ServiceMonitor" || o.kind === "PrometheusRule");

/** kube-prometheus-stack's default selector for a stack installed as "kube-prometheus-stack". */
const selected = (labels: Record<string, string> | undefined, stackRelease = "kube-prometheus-stack") => labels?.release === stackRelease;

describe("monitoring object labels", () => {
  it("by default both objects carry release: kube-prometheus-stack, beside the chart's own labels", () => {
    const objects = monitoring([]);
    expect(objects.map((o) => o.kind).sort()).toEqual(["PrometheusRule", "ServiceMonitor"]);
    for (const o of objects) {
      expect(selected(o.metadata.labels), o.kind).toBe(true);
      expect(o.metadata.labels?.["app.kubernetes.io/instance"], o.kind).toBe("rf");
    }
  });

  it("the release label follows the stack's release name, per object", () => {
    const objects = monitoring(["serviceMonitor.labels.release=prom", "prometheusRule.labels.release=prom-rules"]);
    expect(objects.find((o) => o.kind === "ServiceMonitor")!.metadata.labels?.release).toBe("prom");
    expect(objects.find((o) => o.kind === "PrometheusRule")!.metadata.labels?.release).toBe("prom-rules");
  });

  it("the release label can be removed and replaced by other labels", () => {
    const objects = monitoring([
      "serviceMonitor.labels.release=null",
      "prometheusRule.labels.release=null",
      "serviceMonitor.labels.team=payments",
      "prometheusRule.labels.team=payments",
    ]);
    for (const o of objects) {
      expect(o.metadata.labels?.release, o.kind).toBeUndefined();
      expect(o.metadata.labels?.team, o.kind).toBe("payments");
    }
  });

  it("the schema refuses a label that is not a string (negative control for the values path)", () => {
    const r = helm(templateArgs({ set: [...ENABLED, "serviceMonitor.labels.release[0]=x"] }));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("serviceMonitor.labels.release: Invalid type");
  });

  it("a stack installed under another name does not select the default (the label check can fail)", () => {
    for (const o of monitoring([])) expect(selected(o.metadata.labels, "prometheus"), o.kind).toBe(false);
  });
});
