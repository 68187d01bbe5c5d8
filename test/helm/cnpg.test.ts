/**
 * paydb on CloudNativePG (decision 044): deploy/cnpg/databases.yaml is valid against the Cluster
 * CRD of CloudNativePG 1.30.0 (vendored in test/helm/crds), replicates synchronously without
 * falling back to asynchronous, and declares exactly the logins values-cnpg.yaml hands to the
 * chart, rail-proxy's with pg_monitor (its durability check reads sync_state). The chart renders
 * values-cnpg.yaml on top of each cloud example, pointing every component at the -rw Service
 * with durability synchronous-standby. Negative controls: a misspelt synchronous field, the
 * "preferred" durability and a Cluster missing the proxy's pg_monitor are each caught.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, parse } from "yaml";
import { crdProblems } from "./crd-schema.js";
import { chartDir, root } from "./helm-tool.js";
import { containers, podSpecs, render } from "./render.js";

type Cluster = { apiVersion: string; kind: string; metadata: { name: string }; spec: any };

const clusters = (): Cluster[] => parseAllDocuments(readFileSync(join(root, "deploy", "cnpg", "databases.yaml"), "utf8")).map((d) => d.toJS() as Cluster);
const values = parse(readFileSync(join(chartDir, "values-cnpg.yaml"), "utf8"));

const GROUP: Record<string, string> = {
  railProxy: "railfence_rail_proxy",
  executor: "railfence_executor",
  payouts: "railfence_payouts",
  reconciler: "railfence_reconciler",
  auditor: "railfence_auditor",
  lock: "railfence_lock",
};

/** What is wrong with a paydb/lockdb Cluster for railfence (empty when nothing). */
function clusterFaults(c: Cluster, logins: Record<string, { user: string; existingSecret: string }>): string[] {
  const out: string[] = [];
  const sync = c.spec.postgresql?.synchronous;
  if (!sync || !(sync.number >= 1)) out.push(`${c.metadata.name}: no synchronous standby required`);
  if (sync?.dataDurability !== "required") out.push(`${c.metadata.name}: dataDurability ${sync?.dataDurability} (falls back to asynchronous)`);
  if (!(c.spec.instances >= 2)) out.push(`${c.metadata.name}: ${c.spec.instances} instance(s)`);
  const roles = new Map<string, any>((c.spec.managed?.roles ?? []).map((r: any) => [r.name, r]));
  for (const [key, l] of Object.entries(logins)) {
    if (key === "migrations") continue;
    const r = roles.get(l.user);
    const want = key === "railProxy" ? [GROUP[key], "pg_monitor"] : [GROUP[key]];
    if (!r) out.push(`${l.user}: not declared`);
    else if (JSON.stringify([...(r.inRoles ?? [])].sort()) !== JSON.stringify([...want].sort()))
      out.push(`${l.user}: inRoles ${JSON.stringify(r.inRoles)}, want ${JSON.stringify(want)}`);
    else if (r.passwordSecret?.name !== l.existingSecret) out.push(`${l.user}: password from ${r.passwordSecret?.name}, the chart reads ${l.existingSecret}`);
  }
  return out;
}

describe("paydb on CloudNativePG", () => {
  it("the Clusters are valid against CloudNativePG 1.30.0's Cluster CRD", () => {
    const cs = clusters();
    expect(cs.map((c) => c.metadata.name)).toEqual(["paydb", "lockdb"]);
    for (const c of cs) expect(crdProblems(c).problems).toEqual([]);
  });

  it("replicate synchronously, never falling back, and declare exactly the chart's logins (rail-proxy's with pg_monitor)", () => {
    const [paydb, lockdb] = clusters();
    expect(clusterFaults(paydb!, values.database.paydb.credentials)).toEqual([]);
    expect(clusterFaults(lockdb!, values.database.lockdb.credentials)).toEqual([]);
    expect(paydb!.spec.bootstrap.initdb.owner).toBe(values.database.paydb.credentials.migrations.user);
  });

  it("negative controls: a misspelt field, v1beta1, preferred durability and a proxy login without pg_monitor are caught", () => {
    const [paydb] = clusters();
    const typo = structuredClone(paydb!);
    typo.spec.postgresql.synchronous.dataDurabilty = "required";
    expect(crdProblems(typo).problems.join("\n")).toMatch(/synchronous\.dataDurabilty: unknown field/);
    expect(crdProblems({ ...paydb!, apiVersion: "postgresql.cnpg.io/v1beta1" }).problems.join("\n")).toMatch(/not served/);
    const preferred = structuredClone(paydb!);
    preferred.spec.postgresql.synchronous.dataDurability = "preferred";
    expect(crdProblems(preferred).problems).toEqual([]);
    expect(clusterFaults(preferred, values.database.paydb.credentials)).toEqual(["paydb: dataDurability preferred (falls back to asynchronous)"]);
    const noMonitor = structuredClone(paydb!);
    noMonitor.spec.managed.roles[0].inRoles = ["railfence_rail_proxy"];
    expect(clusterFaults(noMonitor, values.database.paydb.credentials).join()).toMatch(/railfence_rail_proxy_login: inRoles/);
  });

  it.each(["values-gke.yaml", "values-eks.yaml"])(
    "%s + values-cnpg.yaml: every component on the -rw Service, durability synchronous-standby, no login provisioning",
    (cloud) => {
      const objects = render({ valuesFiles: [cloud, "values-cnpg.yaml"], set: ["database.paydb.durability=synchronous-standby"] });
      const envs = podSpecs(objects).flatMap((p) => containers(p.spec).flatMap((c: any) => (c.env ?? []).map((e: any) => ({ component: p.component, ...e }))));
      const urls = envs.filter((e) => /^(PAYDB|LOCKDB)_URL$/.test(e.name) || /DATABASE_URL$/.test(e.name));
      expect(urls.length).toBeGreaterThan(5);
      for (const u of urls) expect(u.value, `${u.component} ${u.name}`).toMatch(/@(paydb|lockdb)-rw\.railfence\.svc\.cluster\.local:5432\//);
      expect(envs.find((e) => e.component === "rail-proxy" && e.name === "PAYDB_DURABILITY")?.value).toBe("synchronous-standby");
      expect(values.database.paydb.durability).toBe("synchronous-standby");
      expect(values.migrations.provisionLogins).toBe(false);
      // The cloud example's External Secrets for the logins are switched off: the Cluster's Secrets are used.
      expect(objects.filter((o) => o.kind === "ExternalSecret" && /-password$/.test(o.metadata.name))).toEqual([]);
    },
  );
});
