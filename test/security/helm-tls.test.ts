/** The chart's TLS values: every component gets its Secret, TLS env, https URLs and TLS-proof probes. */
import { describe, expect, it } from "vitest";
import { validateObject } from "../helm/k8s-validate.js";
import { containers, podSpecs, render } from "../helm/render.js";

const MINIMAL = ["rail.url=https://rail.example.com", "rail.existingSecret=rail-cred", "rail.egress.cidrs={203.0.113.0/24}"];
const TLS_COMPONENTS = ["lock", "rail-proxy", "payouts", "executor", "reconciler"];

const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).filter((e: any) => "value" in e).map((e: any) => [e.name, e.value]));

describe("helm: tls.enabled", () => {
  const objects = render({ set: [...MINIMAL, "tls.enabled=true", "tls.secrets.payouts=payouts-cert"] });
  const pods = podSpecs(objects).filter((p) => TLS_COMPONENTS.includes(p.component));

  it("renders valid objects", async () => {
    expect(pods.map((p) => p.component)).toEqual(expect.arrayContaining(TLS_COMPONENTS));
    expect((await Promise.all(objects.map(validateObject))).flat()).toEqual([]);
  });

  it("mounts each component's own Secret read-only and points TLS_* at it", () => {
    for (const p of pods) {
      const vol = (p.spec.volumes ?? []).find((v: any) => v.name === "tls");
      expect(vol?.secret?.secretName, p.component).toBe(p.component === "payouts" ? "payouts-cert" : `rf-railfence-${p.component}-tls`);
      const c = containers(p.spec)[0];
      expect(c.volumeMounts.find((m: any) => m.name === "tls")).toMatchObject({ readOnly: true, mountPath: "/var/run/secrets/railfence/tls" });
      const env = envOf(c);
      expect(env).toMatchObject({
        TLS_CERT_FILE: "/var/run/secrets/railfence/tls/tls.crt",
        TLS_KEY_FILE: "/var/run/secrets/railfence/tls/tls.key",
        TLS_CA_FILE: "/var/run/secrets/railfence/tls/ca.crt",
        TLS_CLIENT_AUTH: "require",
      });
      expect(env.ALLOW_INSECURE).toBeUndefined();
      for (const k of ["LOCK_URL", "RAIL_PROXY_URLS"]) if (env[k]) expect(env[k]).toMatch(/^https:\/\//);
    }
  });

  it("gives every pod that talks TLS a Secret of its own (the audit's identity is never another component's)", () => {
    const secretOf = new Map<string, string>();
    for (const p of podSpecs(objects)) {
      const vol = (p.spec.volumes ?? []).find((v: any) => v.name === "tls");
      if (p.component === "migrate") {
        expect(vol, "the migration Job talks to PostgreSQL only").toBeUndefined();
        continue;
      }
      expect(vol?.secret?.secretName, p.component).toBeDefined();
      secretOf.set(p.component, vol.secret.secretName);
    }
    expect(secretOf.get("audit")).toBe("rf-railfence-audit-tls");
    expect(new Set(secretOf.values()).size).toBe(secretOf.size);
    // The audit is a client only: the CLI's certificate variables, https to rail-proxy, no server settings.
    const audit = containers(podSpecs(objects).find((p) => p.component === "audit")!.spec)[0];
    const env = envOf(audit);
    expect(env).toMatchObject({
      RAILFENCE_TLS_CERT_FILE: "/var/run/secrets/railfence/tls/tls.crt",
      RAILFENCE_TLS_KEY_FILE: "/var/run/secrets/railfence/tls/tls.key",
      RAILFENCE_TLS_CA_FILE: "/var/run/secrets/railfence/tls/ca.crt",
    });
    expect(env.RAILFENCE_RAIL_PROXY_URL).toMatch(/^https:\/\//);
    expect(env.TLS_CERT_FILE).toBeUndefined();
  });

  it("probes over plain HTTP on the metrics port (kubelet gRPC probes cannot do TLS)", () => {
    for (const p of pods) {
      const c = containers(p.spec)[0];
      // The CronJob reconciler has no probes; every long-running component has a liveness probe.
      if (p.component !== "reconciler") expect(c.livenessProbe, p.component).toBeDefined();
      for (const kind of ["readinessProbe", "livenessProbe"].filter((k) => c[k])) {
        expect(c[kind]?.grpc, `${p.component} ${kind}`).toBeUndefined();
        expect(c[kind]?.httpGet?.port, `${p.component} ${kind}`).toBe("metrics");
      }
      if ((c.ports ?? []).some((x: any) => x.name === "grpc")) expect(c.readinessProbe.httpGet.path).toBe("/readyz");
    }
  });
});

describe("helm: tls disabled (the named escape hatch; mutual TLS is the default)", () => {
  it("makes the cleartext choice explicit (ALLOW_INSECURE) and mounts no TLS Secret", () => {
    const all = podSpecs(render({ set: [...MINIMAL, "railStub.enabled=true", "tls.enabled=false", "tls.insecureCleartextWithoutIdentities=true"] }));
    const audit = all.find((p) => p.component === "audit")!;
    expect((audit.spec.volumes ?? []).some((v: any) => v.name === "tls")).toBe(false);
    expect(Object.keys(envOf(containers(audit.spec)[0])).filter((k) => k.includes("TLS"))).toEqual([]);
    const pods = all.filter((p) => TLS_COMPONENTS.includes(p.component));
    for (const p of pods) {
      const env = envOf(containers(p.spec)[0]);
      expect(env.ALLOW_INSECURE, p.component).toBe("true");
      expect(env.TLS_CERT_FILE).toBeUndefined();
      expect((p.spec.volumes ?? []).some((v: any) => v.name === "tls")).toBe(false);
    }
  });
});
