/**
 * Signed fencing tokens in the chart: on by default (test/helm/secure-defaults.test.ts); the key reaches lock and rail-proxy,
 * and the migration Job's paydb container (which installs it into paydb, where every payout fence
 * is verified with it: migration 014), and nothing else.
 */
import { describe, expect, it } from "vitest";
import { containers, podSpecs, render } from "./render.js";

const mounting = (objects: ReturnType<typeof render>, secret: string) =>
  podSpecs(objects)
    .filter((p) => (p.spec.volumes ?? []).some((v: any) => v.secret?.secretName === secret))
    .map((p) => p.component)
    .sort();

describe("token signing", () => {
  it("with the named escape hatch (development only), no pod gets a signing key", () => {
    const objects = render({ set: ["railStub.enabled=true", "tokenSigning.enabled=false", "tokenSigning.insecureAcceptForgedTokens=true"] });
    const envNames = podSpecs(objects).flatMap((p) => containers(p.spec).flatMap((c: any) => (c.env ?? []).map((e: any) => e.name)));
    expect(envNames).not.toContain("LOCK_TOKEN_SIGNING_KEY_FILE");
    expect(envNames).not.toContain("RAIL_PROXY_TOKEN_KEY_FILE");
    expect(envNames).not.toContain("TOKEN_SIGNING_KEY_FILE");
  });

  it("mounts the named Secret read-only into lock, rail-proxy and paydb's migration container, and nowhere else", () => {
    const objects = render({ set: ["tokenSigning.existingSecret=rf-token-key"] });
    expect(mounting(objects, "rf-token-key")).toEqual(["lock", "migrate", "rail-proxy"]);
    const migrate = podSpecs(objects).find((p) => p.component === "migrate")!;
    const withKey = containers(migrate.spec).filter((c: any) => (c.env ?? []).some((e: any) => e.name === "TOKEN_SIGNING_KEY_FILE"));
    expect(withKey.map((c: any) => c.name)).toEqual(["migrate-paydb"]);
    expect(withKey[0].env.find((e: any) => e.name === "TOKEN_SIGNING_KEY_FILE").value).toBe("/var/run/secrets/railfence/token-signing/token-signing-key");
    expect(withKey[0].volumeMounts.find((m: any) => m.name === "token-signing")?.readOnly).toBe(true);
    const others = containers(migrate.spec).filter((c: any) => c.name !== "migrate-paydb");
    expect(others.flatMap((c: any) => (c.volumeMounts ?? []).map((m: any) => m.name))).not.toContain("token-signing");
    for (const p of podSpecs(objects).filter((x) => ["lock", "rail-proxy"].includes(x.component))) {
      const c = containers(p.spec)[0];
      const env = Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));
      const wanted = p.component === "lock" ? "LOCK_TOKEN_SIGNING_KEY_FILE" : "RAIL_PROXY_TOKEN_KEY_FILE";
      expect(env[wanted]).toBe("/var/run/secrets/railfence/token-signing/token-signing-key");
      expect(c.volumeMounts.find((m: any) => m.name === "token-signing")?.readOnly).toBe(true);
    }
  });
});
