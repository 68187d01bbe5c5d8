/**
 * The test cluster's values profile (profile.ts) against the chart, without a cluster: the schema
 * accepts it, every rendered object is valid, the chart's own checks hold, and the profile does
 * what `npm run test:cluster` relies on (local image never pulled, rail latency in the stub only,
 * databases and collector on the node address). Runs in `npm test`; the cluster run is separate.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { afterAll, describe, expect, it } from "vitest";
import type { PostgresServer } from "../../tools/harness/postgres.js";
import { networkPolicyViolations, probeViolations, railSecretViolations, securityViolations } from "../helm/chart-checks.js";
import { helm } from "../helm/helm-tool.js";
import { validateObject } from "../helm/k8s-validate.js";
import { containers, podSpecs, templateArgs, type K8sObject } from "../helm/render.js";
import type { ClusterInfo } from "./kube.js";
import { LOGINS, NAMESPACE, RELEASE, valuesProfile, writeProfile, type Databases } from "./profile.js";

const info: ClusterInfo = {
  kubernetesVersion: "v1.34.4",
  kubeconfig: "/dev/null",
  kubectl: "kubectl",
  node: "railfence-node",
  nodeIp: "10.244.0.1",
  podCidr: "10.244.0.0/24",
  containerdAddress: "/dev/null",
  stepsFile: "/dev/null",
};
const dbs = {
  server: { port: 45432 } as PostgresServer,
  passwords: Object.fromEntries(LOGINS.map((l) => [l.secret, "x"])),
  podUrl: (db: string) => `postgresql://10.244.0.1:45432/${db}?sslmode=disable`,
  nodeUrl: (db: string) => `postgres://postgres@127.0.0.1:45432/${db}`,
} as Databases;

const dir = mkdtempSync(join(tmpdir(), "cluster-profile-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function renderProfile(extra: string[] = []): { status: number; stderr: string; objects: K8sObject[] } {
  const values = valuesProfile({ imageRepository: "localhost/railfence", imageTag: "cluster-test", otlpEndpoint: "http://10.244.0.1:4318", info, dbs });
  const file = writeProfile(dir, "values-cluster.json", values);
  const r = helm([...templateArgs({ release: RELEASE, namespace: NAMESPACE }), "-f", file, ...extra]);
  const objects =
    r.status === 0
      ? parseAllDocuments(r.stdout)
          .map((d) => d.toJS() as K8sObject)
          .filter((o) => o && typeof o === "object")
      : [];
  return { status: r.status, stderr: r.stderr, objects };
}

const env = (c: { env?: Array<{ name: string; value?: string }> }, name: string) => c.env?.find((e) => e.name === name)?.value;

describe("the test cluster's values profile", () => {
  const { status, stderr, objects } = renderProfile();

  it("passes the chart's schema and renders valid objects", async () => {
    expect(stderr).toBe("");
    expect(status).toBe(0);
    expect((await Promise.all(objects.map(validateObject))).flat()).toEqual([]);
  });

  it("keeps the chart's guarantees (credential, probes, security, network rules)", () => {
    expect([...railSecretViolations(objects), ...probeViolations(objects), ...securityViolations(objects)]).toEqual([]);
    expect(networkPolicyViolations(objects, [])).toEqual([]);
  });

  it("runs the local image without ever pulling, and puts the rail latency into the stub only", () => {
    const all = podSpecs(objects).flatMap((p) => containers(p.spec).map((c) => ({ component: p.component, c })));
    expect(all.length).toBeGreaterThan(5);
    for (const { c } of all) {
      expect(c.image).toBe("localhost/railfence:cluster-test");
      expect(c.imagePullPolicy).toBe("Never");
    }
    const withFaults = all.filter(({ c }) => env(c, "RAIL_STUB_FAULTS") !== undefined).map(({ component }) => component);
    expect(withFaults).toEqual(["rail-stub"]);
    expect(JSON.parse(env(all.find(({ component }) => component === "rail-stub")!.c, "RAIL_STUB_FAULTS")!)).toEqual([
      { kind: "LATENCY", latencyMs: 150, count: 0, clientReferencePrefix: "" },
    ]);
  });

  it("points every database URL and the collector at the node; each component its own login and Secret", () => {
    const pods = podSpecs(objects);
    const all = pods.flatMap((p) => containers(p.spec));
    const urls = all.flatMap((c) =>
      (c.env ?? []).filter((e: { name: string }) => /_URL$/.test(e.name) && /^postgres/.test(String((e as { value?: string }).value))),
    );
    expect(urls.length).toBeGreaterThan(0);
    for (const u of urls) {
      expect(u.value).toMatch(/^postgresql:\/\/[a-z_]+@10\.244\.0\.1:45432\//);
      expect(u.value).not.toMatch(/:[^/@]*@/);
    }
    for (const c of all.filter((x) => env(x, "OTEL_EXPORTER_OTLP_ENDPOINT") !== undefined))
      expect(env(c, "OTEL_EXPORTER_OTLP_ENDPOINT")).toBe("http://10.244.0.1:4318");
    // Each long-running component logs in as the login the profile gives it and mounts only its
    // own password Secret (the migration Job mounts them all: it provisions the logins).
    for (const l of LOGINS.filter((x) => x.component !== "migrate")) {
      const pod = pods.find((p) => p.component === l.component);
      expect(pod, l.component).toBeDefined();
      const cs = containers(pod!.spec);
      const dbUrls = cs.flatMap((c) => (c.env ?? []).map((e: { value?: string }) => String(e.value ?? ""))).filter((v) => v.startsWith("postgresql://"));
      expect(dbUrls, l.component).toContain(`postgresql://${l.role}@10.244.0.1:45432/${l.database}?sslmode=disable`);
      const secrets = ((pod!.spec.volumes ?? []) as Array<{ secret?: { secretName: string } }>)
        .map((v) => v.secret?.secretName)
        .filter((n) => n?.startsWith(`${RELEASE}-db-`));
      expect(secrets, l.component).toEqual([l.secret]);
    }
    const migrate = pods.find((p) => p.component === "migrate");
    const mounted = new Set(((migrate!.spec.volumes ?? []) as Array<{ secret?: { secretName: string } }>).map((v) => v.secret?.secretName));
    for (const l of LOGINS) expect(mounted.has(l.secret), l.secret).toBe(true);
  });

  it("the chart without the profile sets no fault plan (negative control)", () => {
    const r = helm([...templateArgs({ release: RELEASE, namespace: NAMESPACE }), "--set", "railStub.enabled=true"]);
    expect(r.status).toBe(0);
    expect(r.stdout).not.toContain("RAIL_STUB_FAULTS");
    // The schema takes the plan as a JSON string, nothing else.
    const wrong = renderProfile(["--set-json", 'railStub.faults=[{"kind":"LATENCY"}]']);
    expect(wrong.status).not.toBe(0);
    expect(wrong.stderr).toContain("faults");
  });
});
