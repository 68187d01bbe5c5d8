/**
 * Validates rendered objects without a cluster.
 *
 * kubernetes-models checks types and required fields but lets unknown fields pass, and an
 * unknown field is exactly the typo that silently drops a setting (`readOnlyRootFileSystem`).
 * So the same compiled schema validator is run a second time over a Proxy that records every
 * property the validator looks at: a property it never reads is not in the schema. Objects the
 * validator enumerates (maps such as labels) count as fully known.
 */
import { createRequire } from "node:module";
import { crdProblems as againstVendoredCrd, hasCrd } from "./crd-schema.js";
import type { K8sObject } from "./render.js";

// CommonJS require keeps the per-group model modules out of the bundler's static analysis.
const require = createRequire(import.meta.url);

interface ModelClass {
  new (data: unknown): { validate(): void };
  prototype: { validate(this: unknown): void };
}

/**
 * Custom resources the chart may render (not in kubernetes-models) whose CRDs are not vendored
 * under test/helm/crds: the fields we use, per path, as a small closed schema. `*` marks a map
 * with free keys. Those with a vendored CRD (External Secrets) are checked against it instead
 * (crd-schema.ts).
 */
const crdShapes: Record<string, Record<string, string[]>> = {
  "monitoring.coreos.com/v1/ServiceMonitor": {
    spec: ["selector", "namespaceSelector", "endpoints"],
    "spec.selector": ["matchLabels"],
    "spec.selector.matchLabels": ["*"],
    "spec.namespaceSelector": ["matchNames", "any"],
    "spec.endpoints[]": ["port", "path", "interval", "scheme", "scrapeTimeout"],
  },
  "monitoring.coreos.com/v1/PodMonitor": {
    spec: ["selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel", "podTargetLabels"],
    "spec.selector": ["matchLabels"],
    "spec.selector.matchLabels": ["*"],
    "spec.namespaceSelector": ["matchNames", "any"],
    "spec.podMetricsEndpoints[]": ["port", "path", "interval", "scheme", "scrapeTimeout", "relabelings"],
    "spec.podMetricsEndpoints[].relabelings[]": ["sourceLabels", "targetLabel", "replacement", "regex", "action", "separator"],
  },
  // Google Cloud Managed Service for Prometheus (monitoring.googleapis.com/v1).
  "monitoring.googleapis.com/v1/PodMonitoring": {
    spec: ["selector", "endpoints", "targetLabels"],
    "spec.selector": ["matchLabels"],
    "spec.selector.matchLabels": ["*"],
    "spec.endpoints[]": ["port", "path", "interval", "scheme", "timeout"],
  },
  "monitoring.googleapis.com/v1/Rules": {
    spec: ["groups"],
    "spec.groups[]": ["name", "interval", "rules"],
    "spec.groups[].rules[]": ["alert", "record", "expr", "for", "labels", "annotations"],
    "spec.groups[].rules[].labels": ["*"],
    "spec.groups[].rules[].annotations": ["*"],
  },
  "monitoring.coreos.com/v1/PrometheusRule": {
    spec: ["groups"],
    "spec.groups[]": ["name", "interval", "rules"],
    "spec.groups[].rules[]": ["alert", "record", "expr", "for", "labels", "annotations"],
    "spec.groups[].rules[].labels": ["*"],
    "spec.groups[].rules[].annotations": ["*"],
  },
};

const metadataKeys = ["name", "namespace", "labels", "annotations"];

function modelFor(apiVersion: string, kind: string): ModelClass | undefined {
  // "apps/v1" -> kubernetes-models/apps/v1; the core group "v1" -> kubernetes-models/v1.
  try {
    const mod = require(`kubernetes-models/${apiVersion}`) as Record<string, unknown>;
    return mod[kind] as ModelClass | undefined;
  } catch {
    return undefined;
  }
}

/** Runs validate over a recording Proxy; returns the paths of properties never read. */
function unknownFields(model: ModelClass, data: unknown): string[] {
  const read = new WeakMap<object, Set<string>>();
  const enumerated = new WeakSet<object>();
  const proxies = new WeakMap<object, object>();
  const mark = (t: object, k: string) => {
    let s = read.get(t);
    if (!s) read.set(t, (s = new Set()));
    s.add(k);
  };
  const wrap = (v: unknown): unknown => {
    if (v === null || typeof v !== "object") return v;
    const cached = proxies.get(v);
    if (cached) return cached;
    const p = new Proxy(v, {
      get(t, k, r) {
        if (typeof k === "string") mark(t, k);
        return wrap(Reflect.get(t, k, r));
      },
      has(t, k) {
        if (typeof k === "string") mark(t, k);
        return Reflect.has(t, k);
      },
      ownKeys(t) {
        enumerated.add(t);
        return Reflect.ownKeys(t);
      },
    });
    proxies.set(v, p);
    return p;
  };
  model.prototype.validate.call(wrap(data));
  const unknown: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) return v.forEach((x, i) => walk(x, `${path}[${i}]`));
    if (v === null || typeof v !== "object") return;
    const seen = read.get(v);
    for (const [k, child] of Object.entries(v)) {
      if (!enumerated.has(v) && !seen?.has(k)) unknown.push(`${path}.${k}`);
      else walk(child, `${path}.${k}`);
    }
  };
  walk(data, "");
  return unknown;
}

function crdProblems(shape: Record<string, string[]>, o: K8sObject): string[] {
  const problems: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) return v.forEach((x) => walk(x, `${path}[]`));
    if (v === null || typeof v !== "object") return;
    const allowed = shape[path];
    if (!allowed) return problems.push(`${path}: no schema for this object`);
    if (allowed.includes("*")) return;
    for (const [k, child] of Object.entries(v)) {
      if (!allowed.includes(k)) problems.push(`${path}.${k}: unknown field`);
      else walk(child, `${path}.${k}`);
    }
  };
  walk(o.spec, "spec");
  return problems;
}

/** Every problem found in one object (empty when valid). */
export async function validateObject(o: K8sObject): Promise<string[]> {
  const id = `${o.kind}/${o.metadata?.name}`;
  const problems: string[] = [];
  if (!o.metadata?.name) problems.push(`${id}: metadata.name missing`);
  if (hasCrd(o.apiVersion, o.kind)) return [...problems, ...againstVendoredCrd(o).problems];
  const crd = crdShapes[`${o.apiVersion}/${o.kind}`];
  if (crd) {
    for (const k of Object.keys(o)) if (!["apiVersion", "kind", "metadata", "spec"].includes(k)) problems.push(`${id}: unknown top-level field ${k}`);
    for (const k of Object.keys(o.metadata ?? {})) if (!metadataKeys.includes(k)) problems.push(`${id}: unknown metadata field ${k}`);
    return [...problems, ...crdProblems(crd, o).map((p) => `${id}: ${p}`)];
  }
  const model = modelFor(o.apiVersion, o.kind);
  if (!model) return [`${id}: ${o.apiVersion} ${o.kind} is not a known Kubernetes type`];
  try {
    new model(o).validate();
  } catch (err) {
    return [`${id}: ${err instanceof Error ? err.message : String(err)}`];
  }
  return [...problems, ...unknownFields(model, o).map((p) => `${id}: unknown field ${p}`)];
}
