/**
 * External Secrets on external-secrets.io/v1 (decision 042): every Secret the chart's pods mount
 * can be synced by External Secrets Operator, and what the chart renders is valid against the
 * CRDs of a current release (External Secrets v1.3.2, vendored in test/helm/crds), which no
 * longer serve v1beta1. Negative controls: the chart's old v1beta1 rendering, a misspelt field
 * and a value outside an enum are each refused by the same validation.
 */
import { describe, expect, it } from "vitest";
import { crdProblems } from "./crd-schema.js";
import { helm } from "./helm-tool.js";
import { byKind, podSpecs, render, templateArgs, type K8sObject } from "./render.js";

const EXAMPLES = ["values-gke.yaml", "values-eks.yaml"];
const ESO_KINDS = new Set(["ExternalSecret", "SecretStore"]);

/** Every value that sends a Secret through External Secrets, for a release with the rail stub. */
const EVERYTHING_EXTERNAL = [
  "railStub.enabled=true",
  "externalSecrets.secretStore.create=true",
  "externalSecrets.secretStore.gcpsm.projectID=p",
  "rail.externalSecret.enabled=true",
  "tokenSigning.externalSecret.key=rf-token-signing-key",
  "database.raildb.externalSecret.key=rf-db-raildb",
  ...["migrations", "railProxy", "executor", "payouts", "reconciler", "auditor"].map((c) => `database.paydb.credentials.${c}.externalSecret.key=rf-paydb-${c}`),
  ...["migrations", "lock"].map((c) => `database.lockdb.credentials.${c}.externalSecret.key=rf-lockdb-${c}`),
  ...["lock", "railProxy", "payouts", "executor", "reconciler", "audit", "railStub"].map((c) => `tls.externalSecrets.${c}=rf-tls-${c}`),
];

const esoObjects = (objects: K8sObject[]) => objects.filter((o) => ESO_KINDS.has(o.kind));
const hook = (o: K8sObject) => o.metadata.annotations?.["helm.sh/hook"];

/** Secret names mounted by any pod of the release (volumes and projected sources). */
function mountedSecrets(objects: K8sObject[]): Set<string> {
  const names = new Set<string>();
  for (const p of podSpecs(objects))
    for (const v of p.spec.volumes ?? []) {
      if (v.secret?.secretName) names.add(v.secret.secretName);
      for (const s of v.projected?.sources ?? []) if (s.secret?.name) names.add(s.secret.name);
    }
  return names;
}

describe("chart: External Secrets on external-secrets.io/v1", () => {
  it.each(EXAMPLES)("%s renders ExternalSecrets and a SecretStore valid against the v1.3.2 CRDs", (file) => {
    const objects = esoObjects(render({ valuesFiles: [file] }));
    expect(byKind(objects, "SecretStore")).toHaveLength(1);
    // rail credential, 6 paydb logins, 2 lockdb logins, the signing key.
    expect(byKind(objects, "ExternalSecret")).toHaveLength(10);
    for (const o of objects) {
      expect(o.apiVersion, `${o.kind}/${o.metadata.name}`).toBe("external-secrets.io/v1");
      expect(crdProblems(o).problems).toEqual([]);
    }
  });

  it("every Secret a pod mounts can come from External Secrets; the chart then makes none itself", () => {
    const objects = render({ set: EVERYTHING_EXTERNAL });
    const targets = new Set(byKind(objects, "ExternalSecret").map((o) => o.spec.target.name as string));
    const mounted = mountedSecrets(objects);
    // 9 database logins (6 paydb, 2 lockdb, raildb), the rail credential, the signing key, 7 TLS Secrets.
    expect(mounted.size).toBe(18);
    expect([...mounted].filter((n) => !targets.has(n))).toEqual([]);
    expect(byKind(objects, "Secret").map((s) => s.metadata.name)).toEqual([]);
    for (const o of esoObjects(objects)) expect(crdProblems(o).problems).toEqual([]);
    // The control: with development values the pods mount the same Secrets, made by the chart itself.
    const plain = render({ set: ["railStub.enabled=true", "rail.credential=x", "database.raildb.password=x"] });
    expect(byKind(plain, "ExternalSecret")).toEqual([]);
    expect([...mountedSecrets(plain)].filter((n) => !targets.has(n)).length).toBe(0);
    expect(byKind(plain, "Secret").length).toBeGreaterThan(5);
  });

  it("a TLS Secret is synced from a JSON secret with tls.crt, tls.key and ca.crt", () => {
    const es = byKind(render({ set: EVERYTHING_EXTERNAL }), "ExternalSecret").find((o) => o.spec.target.name.endsWith("-lock-tls"))!;
    expect(es.spec.data).toEqual(["tls.crt", "tls.key", "ca.crt"].map((f) => ({ secretKey: f, remoteRef: { key: "rf-tls-lock", property: f } })));
  });

  it("what the migration hook Job reads is synced by hooks that run before it, into Secrets that outlive the hook object", () => {
    const all = render({ set: EVERYTHING_EXTERNAL });
    const objects = esoObjects(all);
    const weight = (o: K8sObject) => Number(o.metadata.annotations?.["helm.sh/hook-weight"]);
    const store = byKind(objects, "SecretStore")[0]!;
    expect([hook(store), weight(store)]).toEqual(["pre-install,pre-upgrade", -11]);
    // Older charts made the store and its ServiceAccount as release objects: keep stops the first
    // upgrade from deleting them as objects the chart no longer renders.
    const sa = all.find((o) => o.kind === "ServiceAccount" && o.metadata.name.endsWith("-secrets"))!;
    expect([hook(sa), weight(sa)]).toEqual(["pre-install,pre-upgrade", -11]);
    for (const o of [store, sa]) expect(o.metadata.annotations?.["helm.sh/resource-policy"], o.kind).toBe("keep");
    for (const es of byKind(objects, "ExternalSecret")) {
      const early = /-password$|-token-signing$/.test(es.metadata.name);
      const id = es.metadata.name;
      if (early) {
        expect([hook(es), weight(es), es.spec.target.creationPolicy, es.spec.target.deletionPolicy], id).toEqual([
          "pre-install,pre-upgrade",
          -10,
          "Orphan",
          "Retain",
        ]);
      } else {
        expect([hook(es), es.spec.target.creationPolicy], id).toEqual([undefined, "Owner"]);
      }
    }
  });

  it("negative control: the chart's old v1beta1 rendering is refused (not served by a current release)", () => {
    for (const o of esoObjects(render({ valuesFiles: ["values-gke.yaml"] }))) {
      const old = { ...o, apiVersion: "external-secrets.io/v1beta1" };
      expect(crdProblems(old).problems.join("\n")).toMatch(/external-secrets\.io\/v1beta1 is not served by this CRD \(served: v1\)/);
    }
  });

  it("negative control: a misspelt field, a value outside an enum and a missing required field are refused", () => {
    const es = byKind(render({ valuesFiles: ["values-eks.yaml"] }), "ExternalSecret")[0]!;
    const store = byKind(render({ valuesFiles: ["values-eks.yaml"] }), "SecretStore")[0]!;
    const typo = structuredClone(es);
    typo.spec.data[0].remoteRef.propery = "x";
    expect(crdProblems(typo).problems.join("\n")).toMatch(/spec\.data\[0\]\.remoteRef\.propery: unknown field/);
    const badEnum = structuredClone(es);
    badEnum.spec.target.creationPolicy = "Owned";
    expect(crdProblems(badEnum).problems.join("\n")).toMatch(/creationPolicy: "Owned" not one of/);
    const noRegion = structuredClone(store);
    delete noRegion.spec.provider.aws.region;
    expect(crdProblems(noRegion).problems.join("\n")).toMatch(/spec\.provider\.aws\.region: required/);
  });

  it("the old rail.externalSecret layout is refused by the values schema (the store moved to externalSecrets)", () => {
    const r = helm(templateArgs({ set: ["rail.externalSecret.secretStoreRef.name=x"] }));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/secretStoreRef/);
  });

  it("refuses a credential with both a password and an External Secrets key, and two syncs into one Secret", () => {
    const both = helm(templateArgs({ set: ["database.paydb.credentials.executor.password=x", "database.paydb.credentials.executor.externalSecret.key=k"] }));
    expect(both.status).not.toBe(0);
    expect(both.stderr).toContain("both password and externalSecret.key are set");
    const shared = helm(
      templateArgs({
        set: [
          "database.paydb.credentials.executor.existingSecret=db",
          "database.paydb.credentials.executor.externalSecret.key=a",
          "database.paydb.credentials.payouts.existingSecret=db",
          "database.paydb.credentials.payouts.passwordKey=other",
          "database.paydb.credentials.payouts.externalSecret.key=b",
        ],
      }),
    );
    expect(shared.status).not.toBe(0);
    expect(shared.stderr).toContain('two External Secrets would write the Secret "db"');
    // Control: each in its own Secret renders.
    const own = helm(
      templateArgs({ set: ["database.paydb.credentials.executor.externalSecret.key=a", "database.paydb.credentials.payouts.externalSecret.key=b"] }),
    );
    expect(own.stderr).toBe("");
    expect(own.status).toBe(0);
  });
});
