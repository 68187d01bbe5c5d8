/**
 * The TLS server on its own (one rail-stub process per case): certificate rotation without a
 * restart, the insecure-mode guard, and TLS_CLIENT_AUTH=request (health open, everything else
 * needs a verified identity).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { Pki, type IdentityFiles } from "../../tools/harness/pki.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { Health } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { eventually, expectRejected } from "../support/clients.js";
import { uniqueSuffix } from "../support/test-mesh.js";
import { clientAs, serverCertificate } from "./support.js";

let dir: string;
let pki: Pki;
let rail: IdentityFiles;
let proxy: IdentityFiles;
let raildbUrl: string;
let credentialFile: string;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "railfence-tls-"));
  pki = await Pki.create(join(dir, "pki"));
  rail = await pki.issue("rail");
  proxy = await pki.issue("rail-proxy");
  credentialFile = join(dir, "credential");
  writeFileSync(credentialFile, "rk_test_credential\n", { mode: 0o600 });
  const admin = inject("pgUrl").replace(/\/[^/]*$/, "");
  const name = `raildb_tls${uniqueSuffix()}`;
  const c = new pg.Client({ connectionString: `${admin}/postgres` });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  raildbUrl = `${admin}/${name}`;
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop(5000)));
});

afterAll(async () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (raildbUrl) {
    const c = new pg.Client({ connectionString: raildbUrl.replace(/\/[^/]*$/, "/postgres") });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${raildbUrl.slice(raildbUrl.lastIndexOf("/") + 1)} WITH (FORCE)`);
    await c.end();
  }
});

function railStub(env: Record<string, string>, tls: boolean, waitReady = true): ServiceProcess {
  const p = new ServiceProcess({
    service: "rail-stub",
    env: { PORT: "0", METRICS_PORT: "0", RAILDB_URL: raildbUrl, RAIL_CREDENTIALS_FILE: credentialFile, ...env },
    tls,
    waitReady,
  });
  started.push(p);
  return p;
}

describe("TLS server", () => {
  it("serves a re-issued certificate on new connections without a restart", async () => {
    // Its own copy of the rail identity, so re-issuing it does not touch the other tests' files.
    const files = await pki.issue("rail", { fileName: "rail-rotating" });
    const p = railStub({ ...Pki.env(files), TLS_RELOAD_INTERVAL_MS: "100" }, true);
    await p.start();
    const pid = p.pid;
    const first = await serverCertificate(p.ready!.port, proxy);
    expect(first.subject.CN).toBe("rail");

    await pki.issue("rail", { fileName: "rail-rotating" }); // same paths, new key and serial
    const rotated = await eventually(async () => {
      const c = await serverCertificate(p.ready!.port, proxy);
      return c.serialNumber !== first.serialNumber ? c : undefined;
    }, "new connections to get the re-issued certificate");
    expect(rotated.subjectaltname).toContain("URI:spiffe://railfence/rail");
    expect(p.pid).toBe(pid);
    expect(p.running).toBe(true);
    // The log line travels through a pipe and may arrive after the handshake that saw the new certificate.
    await eventually(async () => p.lines.some((l) => l.includes('"event":"tls_reloaded"')), "the tls_reloaded log line");
    // Calls still work over the new certificate.
    const client = clientAs(RailService, p.url, proxy);
    await client.listPayments({ pageSize: 1 }, { headers: { authorization: "Bearer rk_test_credential" } });
  });

  it("refuses cleartext on a non-loopback HOST with exit 78, unless ALLOW_INSECURE=true", async () => {
    const refused = railStub({ HOST: "0.0.0.0" }, false, false);
    await refused.start();
    expect(await refused.waitExit()).toBe(78);
    expect(refused.lines.join("\n")).toMatch(/ALLOW_INSECURE/);

    const allowed = railStub({ HOST: "0.0.0.0", ALLOW_INSECURE: "true" }, false);
    await allowed.start();
    const health = await clientAs(Health, `http://127.0.0.1:${allowed.ready!.port}`, { ca: rail.ca })
      .check({})
      .catch((e: unknown) => ConnectError.from(e));
    expect(health).not.toBeInstanceOf(ConnectError);

    // TLS on a non-loopback HOST needs no opt-in.
    const secure = railStub({ HOST: "0.0.0.0", ...Pki.env(rail) }, true);
    await secure.start();
    expect(secure.ready!.port).toBeGreaterThan(0);
  });

  it("refuses cleartext on a non-loopback HOST at configuration time, before it reaches any database", async () => {
    // `docker run` with HOST=0.0.0.0 (the image default) and no TLS: the documented exit 78 and
    // message, not a database connection error that hides the real problem.
    const refused = railStub({ HOST: "0.0.0.0", RAILDB_URL: "postgres://nobody@127.0.0.1:1/raildb" }, false, false);
    await refused.start();
    expect(await refused.waitExit()).toBe(78);
    const output = refused.lines.join("\n");
    expect(output).toMatch(/HOST=0\.0\.0\.0 is not a loopback address and no TLS is configured.*ALLOW_INSECURE=true/);
    expect(output).not.toMatch(/ECONNREFUSED/);
  });

  it("refuses half-configured TLS with exit 78 rather than falling back to cleartext", async () => {
    const p = railStub({ TLS_CERT_FILE: rail.cert }, false, false);
    await p.start();
    expect(await p.waitExit()).toBe(78);
    expect(p.lines.join("\n")).toMatch(/TLS_CERT_FILE and TLS_KEY_FILE/);
  });

  it("with TLS_CLIENT_AUTH=request keeps health open without a certificate and refuses every other call", async () => {
    const p = railStub({ ...Pki.env(rail), TLS_CLIENT_AUTH: "request" }, true);
    await p.start();
    const anonymous = { ca: rail.ca };
    expect((await clientAs(Health, p.url, anonymous).check({})).status).toBe(1);
    const denied = await expectRejected(
      clientAs(RailService, p.url, anonymous).listPayments({ pageSize: 1 }, { headers: { authorization: "Bearer rk_test_credential" } }),
      Code.PermissionDenied,
      "PERMISSION_DENIED",
    );
    expect(errorInfo(denied)?.metadata.identity).toBe("");
    await clientAs(RailService, p.url, proxy).listPayments({ pageSize: 1 }, { headers: { authorization: "Bearer rk_test_credential" } });
  });
});
