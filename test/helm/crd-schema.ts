/**
 * Validates custom resources against the CustomResourceDefinitions of the operator that serves
 * them, vendored under test/helm/crds (see its README for where each file comes from), the way
 * the API server would: the object's apiVersion must be a version the CRD serves, then its
 * openAPIV3Schema is applied (type, required, enum, pattern, lengths, items, maps). One thing is
 * stricter than the API server: a field the schema does not declare is an error here, where the
 * server would prune it silently (the typo that drops a setting). CEL rules
 * (x-kubernetes-validations) are not evaluated; they are counted so a caller can tell.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { root } from "./helm-tool.js";

export const crdDir = join(root, "test", "helm", "crds");

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  maxLength?: number;
  minLength?: number;
  maxItems?: number;
  minItems?: number;
  maxProperties?: number;
  minProperties?: number;
  minimum?: number;
  maximum?: number;
  nullable?: boolean;
  anyOf?: Schema[];
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-validations"?: unknown[];
}

interface CrdVersion {
  name: string;
  served: boolean;
  schema: { openAPIV3Schema: Schema };
}

interface Crd {
  kind: string;
  spec: { group: string; names: { kind: string }; versions: CrdVersion[] };
}

/** Every CRD under test/helm/crds, by group and kind ("external-secrets.io/ExternalSecret"). */
function loadCrds(): Map<string, Crd> {
  const crds = new Map<string, Crd>();
  for (const dir of readdirSync(crdDir, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    for (const f of readdirSync(join(crdDir, dir.name)).filter((n) => n.endsWith(".yaml"))) {
      const crd = parse(readFileSync(join(crdDir, dir.name, f), "utf8")) as Crd;
      if (crd?.kind !== "CustomResourceDefinition") continue;
      crds.set(`${crd.spec.group}/${crd.spec.names.kind}`, crd);
    }
  }
  return crds;
}

let cache: Map<string, Crd> | undefined;
const crds = () => (cache ??= loadCrds());

/** True when a vendored CRD defines this group and kind (whatever the version). */
export function hasCrd(apiVersion: string, kind: string): boolean {
  return crds().has(`${apiVersion.split("/")[0]}/${kind}`);
}

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function check(s: Schema, v: unknown, path: string, out: string[], cel: { rules: number }): void {
  if (s["x-kubernetes-validations"]) cel.rules += s["x-kubernetes-validations"].length;
  if (v === null) {
    if (!s.nullable) out.push(`${path}: null`);
    return;
  }
  if (s["x-kubernetes-int-or-string"]) {
    if (!["integer", "string"].includes(typeOf(v))) out.push(`${path}: ${typeOf(v)}, want integer or string`);
    return;
  }
  const t = typeOf(v);
  if (s.type && !(s.type === t || (s.type === "number" && t === "integer"))) {
    out.push(`${path}: ${t}, want ${s.type}`);
    return;
  }
  if (s.enum && !s.enum.includes(v)) out.push(`${path}: ${JSON.stringify(v)} not one of ${JSON.stringify(s.enum)}`);
  if (typeof v === "string") {
    if (s.pattern && !new RegExp(s.pattern, "u").test(v)) out.push(`${path}: ${JSON.stringify(v)} does not match ${s.pattern}`);
    if (s.maxLength !== undefined && v.length > s.maxLength) out.push(`${path}: longer than ${s.maxLength}`);
    if (s.minLength !== undefined && v.length < s.minLength) out.push(`${path}: shorter than ${s.minLength}`);
  }
  if (typeof v === "number") {
    if (s.minimum !== undefined && v < s.minimum) out.push(`${path}: below ${s.minimum}`);
    if (s.maximum !== undefined && v > s.maximum) out.push(`${path}: above ${s.maximum}`);
  }
  if (Array.isArray(v)) {
    if (s.maxItems !== undefined && v.length > s.maxItems) out.push(`${path}: more than ${s.maxItems} items`);
    if (s.minItems !== undefined && v.length < s.minItems) out.push(`${path}: fewer than ${s.minItems} items`);
    if (s.items) v.forEach((x, i) => check(s.items!, x, `${path}[${i}]`, out, cel));
    return;
  }
  if (t !== "object") return;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (s.maxProperties !== undefined && keys.length > s.maxProperties) out.push(`${path}: more than ${s.maxProperties} fields`);
  if (s.minProperties !== undefined && keys.length < s.minProperties) out.push(`${path}: fewer than ${s.minProperties} fields`);
  for (const r of s.required ?? []) if (!(r in o)) out.push(`${path}.${r}: required`);
  if (s["x-kubernetes-preserve-unknown-fields"]) return;
  for (const k of keys) {
    const p = s.properties?.[k];
    if (p) check(p, o[k], `${path}.${k}`, out, cel);
    else if (typeof s.additionalProperties === "object") check(s.additionalProperties, o[k], `${path}.${k}`, out, cel);
    else if (s.additionalProperties !== true) out.push(`${path}.${k}: unknown field`);
  }
}

/**
 * Problems of one custom resource against its vendored CRD (empty when valid), and how many CEL
 * rules applied to it were left unchecked. metadata is checked for a name only (the API server
 * owns the rest of ObjectMeta).
 */
export function crdProblems(o: { apiVersion: string; kind: string; metadata?: { name?: string } }): { problems: string[]; celRulesNotChecked: number } {
  const id = `${o.kind}/${o.metadata?.name}`;
  const [group, version] = o.apiVersion.split("/");
  const crd = crds().get(`${group}/${o.kind}`);
  if (!crd) return { problems: [`${id}: no CRD vendored for ${group} ${o.kind}`], celRulesNotChecked: 0 };
  const v = crd.spec.versions.find((x) => x.name === version);
  const served = crd.spec.versions.filter((x) => x.served).map((x) => x.name);
  if (!v?.served) return { problems: [`${id}: ${o.apiVersion} is not served by this CRD (served: ${served.join(", ")})`], celRulesNotChecked: 0 };
  const schema = structuredClone(v.schema.openAPIV3Schema);
  // The API server fills ObjectMeta's schema itself; the CRD says only "object".
  schema.properties = { ...schema.properties, metadata: { type: "object", required: ["name"], additionalProperties: true } };
  const out: string[] = [];
  const cel = { rules: 0 };
  check(schema, o, "", out, cel);
  return { problems: out.map((p) => `${id}: ${p.replace(/^\./, "")}`), celRulesNotChecked: cel.rules };
}
