/**
 * A plain install is the secure one: mutual TLS between every component from the chart's own CA
 * (or cert-manager, or the operator's Secrets), and signed fencing tokens from a key the chart
 * generates. Turning either off takes a value whose name says what it gives up, and is refused
 * with production values (docs/security.md, docs/deploy.md). Each check has its negative control:
 * the insecure rendering it must tell apart.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { identityFromSan } from "../../services/shared/process/identity.js";
import { helm } from "./helm-tool.js";
import { byKind, component, containers, podSpecs, render, templateArgs, type K8sObject } from "./render.js";

const dir = mkdtempSync(join(tmpdir(), "railfence-secure-defaults-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const DEV = ["railStub.enabled=true"];
const CLEARTEXT = ["tls.enabled=false", "tls.insecureCleartextWithoutIdentities=true"];
const UNSIGNED = ["tokenSigning.enabled=false", "tokenSigning.insecureAcceptForgedTokens=true"];
const IDENTITY: Record<string, string> = {
  lock: "lock",
  "rail-proxy": "rail-proxy",
  payouts: "payouts",
  executor: "executor",
  reconciler: "reconciler",
  audit: "auditor",
  "rail-stub": "rail",
};
const SERVERS = new Set(["lock", "rail-proxy", "payouts", "rail-stub"]);

const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).filter((e: any) => "value" in e).map((e: any) => [e.name, String(e.value)]));
const decode = (s: K8sObject, key: string) => Buffer.from(s.data[key], "base64").toString();

/** What is not secure in a rendering: every long-running component and job of the release. */
function insecurity(objects: K8sObject[]): string[] {
  const out: string[] = [];
  for (const p of podSpecs(objects).filter((x) => x.component !== "migrate")) {
    const c = p.spec.containers[0];
    const env = envOf(c);
    const id = `${p.component}/${c.name}`;
    const prefix = p.component === "audit" ? "RAILFENCE_TLS_" : "TLS_";
    for (const k of ["CERT_FILE", "KEY_FILE", "CA_FILE"]) if (!env[prefix + k]) out.push(`${id}: no ${prefix}${k}`);
    if (env.ALLOW_INSECURE && env.ALLOW_INSECURE !== "false") out.push(`${id}: ALLOW_INSECURE=${env.ALLOW_INSECURE}`);
    if (p.component !== "audit" && env.TLS_CLIENT_AUTH !== "require") out.push(`${id}: TLS_CLIENT_AUTH=${env.TLS_CLIENT_AUTH}`);
    for (const [k, v] of Object.entries(env))
      if (/_URLS?$/.test(k) && /^http:\/\/[a-z]/.test(v) && !k.startsWith("OTEL")) out.push(`${id}: ${k} is cleartext (${v})`);
    if (p.component === "lock" && !env.LOCK_TOKEN_SIGNING_KEY_FILE) out.push("lock: tokens unsigned");
    if (p.component === "rail-proxy" && !env.RAIL_PROXY_TOKEN_KEY_FILE) out.push("rail-proxy: accepts unsigned tokens");
  }
  const migrate = podSpecs(objects).find((p) => p.component === "migrate");
  if (migrate && !containers(migrate.spec).some((c: any) => envOf(c).TOKEN_SIGNING_KEY_FILE)) out.push("migrate: paydb gets no signing key");
  return out;
}

/** Runs openssl on a certificate (PEM), returning its stdout. */
function openssl(args: string[], pem: string): string {
  const f = join(dir, `c-${Math.random().toString(36).slice(2)}.pem`);
  writeFileSync(f, pem);
  return execFileSync("openssl", args[0] === "verify" ? [...args, f] : [...args, "-in", f], { encoding: "utf8" });
}

describe("secure defaults: helm template with no values", () => {
  const objects = render({ set: DEV });

  it("mutual TLS everywhere, allowInsecure off, signed tokens on", () => {
    expect(insecurity(objects)).toEqual([]);
  });

  it("negative controls: each escape hatch renders what the check above refuses", () => {
    expect(insecurity(render({ set: [...DEV, ...CLEARTEXT] }))).toEqual(
      expect.arrayContaining(["lock/lock: no TLS_CERT_FILE", "lock/lock: ALLOW_INSECURE=true"]),
    );
    expect(insecurity(render({ set: [...DEV, ...UNSIGNED] }))).toEqual([
      "lock: tokens unsigned",
      "rail-proxy: accepts unsigned tokens",
      "migrate: paydb gets no signing key",
    ]);
  });

  it("generates one CA and one certificate per component, signed by it, naming its identity and the Service it serves", () => {
    const secrets = byKind(objects, "Secret");
    const ca = secrets.find((s) => s.metadata.name === "rf-railfence-tls-ca")!;
    expect(ca.type).toBe("kubernetes.io/tls");
    const caPem = decode(ca, "tls.crt");
    const caFile = join(dir, "ca.pem");
    writeFileSync(caFile, caPem);
    const tls = secrets.filter((s) => s.metadata.labels?.["railfence.dev/tls"] === "generated" && s !== ca);
    expect(tls.map((s) => component(s)).sort()).toEqual(Object.keys(IDENTITY).sort());
    for (const s of tls) {
      const comp = component(s)!;
      expect(decode(s, "ca.crt")).toBe(caPem);
      const crt = decode(s, "tls.crt");
      expect(openssl(["verify", "-CAfile", caFile], crt).trim()).toMatch(/: OK$/);
      const text = openssl(["x509", "-noout", "-ext", "subjectAltName,extendedKeyUsage"], crt);
      expect(text).toContain("TLS Web Server Authentication");
      expect(text).toContain("TLS Web Client Authentication");
      const san = text
        .split("\n")
        .find((l) => l.includes("DNS:"))!
        .trim();
      // What the servers read the caller's identity from (services/shared/process/identity.ts).
      expect(identityFromSan(san), comp).toBe(IDENTITY[comp]);
      if (SERVERS.has(comp)) expect(san).toContain(`DNS:rf-railfence-${comp}`);
      // Each component mounts its own Secret only.
      const pods = podSpecs(objects).filter((p) => (p.spec.volumes ?? []).some((v: any) => v.secret?.secretName === s.metadata.name));
      expect(pods.map((p) => p.component)).toEqual([comp]);
    }
    // Nobody mounts the CA key.
    expect(podSpecs(objects).filter((p) => (p.spec.volumes ?? []).some((v: any) => v.secret?.secretName === ca.metadata.name))).toEqual([]);
  });

  it("generates a signing key of 64 characters, a pre-install hook so the migration Job can install it into paydb", () => {
    const key = byKind(objects, "Secret").find((s) => s.metadata.name === "rf-railfence-token-signing")!;
    expect(decode(key, "token-signing-key")).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(key.metadata.annotations?.["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
    const mounting = podSpecs(objects)
      .filter((p) => (p.spec.volumes ?? []).some((v: any) => v.secret?.secretName === key.metadata.name))
      .map((p) => p.component)
      .sort();
    expect(mounting).toEqual(["lock", "migrate", "rail-proxy"]);
  });

  it("rolls lock and rail-proxy onto a new generated key (a hash of it in their pod templates), and only them", () => {
    const key = decode(byKind(objects, "Secret").find((s) => s.metadata.name === "rf-railfence-token-signing")!, "token-signing-key");
    const hash = createHash("sha256").update(Buffer.from(key).toString("base64")).digest("hex").slice(0, 16);
    const annotated = byKind(objects, "Deployment")
      .filter((d) => d.spec.template.metadata.annotations?.["railfence.dev/token-signing-key"] === hash)
      .map((d) => component(d))
      .sort();
    expect(annotated).toEqual(["lock", "rail-proxy"]);
    // With the operator's Secret the chart cannot see the key: no annotation.
    const theirs = render({ set: [...DEV, "tokenSigning.existingSecret=their-key"] });
    expect(byKind(theirs, "Deployment").filter((d) => d.spec.template.metadata.annotations?.["railfence.dev/token-signing-key"])).toEqual([]);
  });

  it("rolls the clients that read their certificate at start (executor, rail-proxy) when it changes, not the servers", () => {
    const ann = (o: K8sObject[], c: string) =>
      byKind(o, "Deployment").find((d) => component(d) === c)!.spec.template.metadata.annotations?.["railfence.dev/tls-certificate"];
    expect(ann(objects, "executor")).toMatch(/^[0-9a-f]{16}$/);
    expect(ann(objects, "rail-proxy")).toMatch(/^[0-9a-f]{16}$/);
    expect(ann(objects, "lock")).toBeUndefined();
    // A fresh rendering without a cluster has no Secret to keep: new certificate, new annotation.
    expect(ann(render({ set: DEV }), "executor")).not.toBe(ann(objects, "executor"));
  });
});

describe("escape hatches are explicit and refused with production values", () => {
  const refused = (set: string[], file?: string) => {
    const r = helm([...templateArgs({ set, ...(file ? { valuesFiles: [file] } : {}) })]);
    expect(r.status, set.join(" ")).not.toBe(0);
    return r.stderr;
  };

  it("tls.enabled=false alone is refused, naming what it gives up", () => {
    expect(refused([...DEV, "tls.enabled=false"])).toContain("tls.insecureCleartextWithoutIdentities=true");
  });

  it("the old tls.allowInsecure is refused with a message naming its replacement", () => {
    expect(refused([...DEV, "tls.enabled=false", "tls.allowInsecure=true"])).toContain("replaced by tls.insecureCleartextWithoutIdentities");
  });

  it("tokenSigning.enabled=false alone is refused", () => {
    expect(refused([...DEV, "tokenSigning.enabled=false"])).toContain("tokenSigning.insecureAcceptForgedTokens=true");
  });

  it.each([
    [["payouts.service.type=LoadBalancer"], "payouts.service.type=LoadBalancer"],
    [["railStub.enabled=false"], "a real rail"],
  ])("cleartext or unsigned tokens with %j are refused", (prod, why) => {
    expect(refused([...DEV, ...CLEARTEXT, ...prod])).toContain(why);
    expect(refused([...DEV, ...UNSIGNED, ...prod])).toContain(why);
  });

  it.each(["values-gke.yaml", "values-eks.yaml"])("%s renders the secure defaults and refuses cleartext (internal load balancer)", (file) => {
    expect(insecurity(render({ valuesFiles: [file] }))).toEqual([]);
    expect(refused(CLEARTEXT, file)).toContain("payouts.service.type=LoadBalancer");
  });
});

describe("other certificate sources", () => {
  it("cert-manager: one Certificate per component with its SPIFFE identity, server and client usages; the chart makes no CA", () => {
    const objects = render({ set: [...DEV, "tls.certManager.issuerRef.name=railfence-ca", "tls.certManager.issuerRef.kind=ClusterIssuer"] });
    const certs = byKind(objects, "Certificate");
    expect(certs.map((c) => [component(c), c.spec.uris[0]]).sort()).toEqual(
      Object.entries(IDENTITY)
        .map(([c, i]) => [c, `spiffe://railfence/${i}`])
        .sort(),
    );
    for (const c of certs) {
      expect(c.spec.secretName).toBe(`rf-railfence-${component(c)}-tls`);
      expect(c.spec.usages).toEqual(expect.arrayContaining(["server auth", "client auth"]));
      expect(c.spec.issuerRef).toEqual({ name: "railfence-ca", kind: "ClusterIssuer", group: "cert-manager.io" });
    }
    expect(byKind(objects, "Secret").filter((s) => s.metadata.labels?.["railfence.dev/tls"])).toEqual([]);
    expect(insecurity(objects)).toEqual([]);
  });

  it("an operator's Secret for one component: nothing generated for it, the rest still generated", () => {
    const objects = render({ set: [...DEV, "tls.secrets.payouts=my-payouts-cert"] });
    const generated = byKind(objects, "Secret").filter((s) => s.metadata.labels?.["railfence.dev/tls"] === "generated");
    expect(generated.map((s) => component(s))).not.toContain("payouts");
    expect(generated.map((s) => component(s))).toContain("executor");
    const payouts = podSpecs(objects).find((p) => p.component === "payouts")!;
    expect(payouts.spec.volumes.find((v: any) => v.name === "tls").secret.secretName).toBe("my-payouts-cert");
  });
});
