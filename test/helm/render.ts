/** Renders the chart with `helm template` and parses every object. */
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { chartDir, helm } from "./helm-tool.js";

/** A rendered Kubernetes object (loosely typed: tests walk it like JSON). */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any;
  [k: string]: any;
};

export interface RenderOptions {
  valuesFiles?: string[];
  set?: string[];
  release?: string;
  namespace?: string;
}

/**
 * Every install must declare paydb's durability (the chart refuses to render without it); the
 * tests render as a single-node install unless they set another value (a later --set wins), or
 * set it empty to see the refusal (test/helm/durability.test.ts).
 */
export const DECLARED_DURABILITY = "database.paydb.durability=single-node";

export function templateArgs(opts: RenderOptions = {}): string[] {
  const args = ["template", opts.release ?? "rf", chartDir, "--namespace", opts.namespace ?? "payments", "--set", DECLARED_DURABILITY];
  for (const f of opts.valuesFiles ?? []) args.push("-f", join(chartDir, f));
  for (const s of opts.set ?? []) args.push("--set", s);
  return args;
}

/** Renders and parses; throws with helm's stderr when rendering fails. */
export function render(opts: RenderOptions = {}): K8sObject[] {
  const r = helm(templateArgs(opts));
  if (r.status !== 0) throw new Error(`helm template failed (${r.status}): ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => {
      if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors[0]?.message}`);
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null && typeof o === "object");
}

/** Pod templates of every workload (Deployment, Job, CronJob), with their owner. */
export function podSpecs(objects: K8sObject[]): Array<{ owner: K8sObject; component: string; spec: any }> {
  const out: Array<{ owner: K8sObject; component: string; spec: any }> = [];
  for (const o of objects) {
    let tpl: any;
    if (o.kind === "Deployment" || o.kind === "Job" || o.kind === "StatefulSet" || o.kind === "DaemonSet") tpl = o.spec?.template;
    else if (o.kind === "CronJob") tpl = o.spec?.jobTemplate?.spec?.template;
    else if (o.kind === "Pod") tpl = { metadata: o.metadata, spec: o.spec };
    if (!tpl) continue;
    out.push({ owner: o, component: tpl.metadata?.labels?.["app.kubernetes.io/component"] ?? "?", spec: tpl.spec });
  }
  return out;
}

/** All containers (init and regular) of a pod spec. */
export function containers(spec: any): any[] {
  return [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
}

export function byKind(objects: K8sObject[], kind: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind);
}

export function component(o: K8sObject): string | undefined {
  return o.metadata.labels?.["app.kubernetes.io/component"];
}
