/**
 * The rail credential never leaves rail-proxy's memory (ADR-007 D1, STYLE "secrets"): every
 * error path we can provoke with the credential present — wrong credentials, bad input, rail
 * faults and ambiguity, a proxy whose paydb goes down, proxies started with bad config — and
 * then every log line of every process, every error (message, metadata, details) a client
 * saw, every /metrics body, and every process's argv and environment are scanned for it.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allowServiceLogins, ownedDatabase, serviceUrl } from "../../tools/harness/database-roles.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { FaultKind, RailControlService } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { RailProxyService, ResolutionOutcome } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { ClientPool, db } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";
import { settle } from "./outcome.js";
import { FuzzTally } from "./summary.js";

let mesh: Mesh;
let tmp: string;
let ownPg: PostgresServer | undefined;
const extra: ServiceProcess[] = [];
const sessions = new ClientPool({ timeoutMs: 10_000 });
/** Everything a client was told, serialized: messages, metadata and details. */
const seenByClients: string[] = [];
/** A second secret: the wrong credential a misconfigured proxy holds is a secret too. */
const wrongCredential = `rk_${randomBytes(24).toString("hex")}`;
const tally = new FuzzTally("secret-hygiene");

const client: ClientPool["client"] = (service, url) => sessions.client(service, url);

/** Runs a call and keeps whatever the client saw (answer or error) for the scan. */
async function observe(what: string, call: Promise<unknown>): Promise<ConnectError | undefined> {
  const res = await settle(call);
  tally.record("error-paths", res.ok ? "ok" : res.error instanceof ConnectError ? Code[res.error.code] : "other");
  if (res.ok) {
    seenByClients.push(`${what} ${JSON.stringify(res.value, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))}`);
    return undefined;
  }
  const ce = ConnectError.from(res.error);
  const headers: string[] = [];
  ce.metadata.forEach((v, k) => headers.push(`${k}: ${v}`));
  seenByClients.push(
    `${what} ${Code[ce.code]} ${ce.message} ${headers.join(" ")} ${JSON.stringify(ce.details, (_k, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v))}`,
  );
  return ce;
}

/**
 * Short enough for ambiguity to show up within the file; the pre-forward budget (half of it)
 * is long enough for an admission on a busy machine, so the rail is really called.
 */
const AMBIGUITY_MARGIN_MS = "2000";

function proxyProcess(name: string, env: Record<string, string>): ServiceProcess {
  const p = new ServiceProcess({
    service: "rail-proxy",
    name,
    env: {
      PORT: "0",
      METRICS_PORT: "0",
      LOG_LEVEL: "debug",
      RAIL_DEADLINE_MS: "400",
      AMBIGUITY_MARGIN_MS,
      DRAIN_MS: "1000",
      PAYDB_DURABILITY: "single-node",
      ...env,
    },
  });
  extra.push(p);
  return p;
}

const request = (acc: string, payout: string, token: bigint) => ({
  accountId: acc,
  payoutId: payout,
  fencingToken: token,
  amount: { amountMinor: 1234n, currency: "EUR" },
  beneficiary: "ben-1",
});

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), "railfence-secrets-"));
  const debug = { LOG_LEVEL: "debug" };
  mesh = testMesh({
    proxies: 2,
    proxyEnv: { ...debug, RAIL_DEADLINE_MS: "400", AMBIGUITY_MARGIN_MS, SWEEP_INTERVAL_MS: "200" },
    railStubEnv: debug,
    lockEnv: debug,
  });
  await mesh.start();
  await mesh.startLock(debug);
  await mesh.startPayouts(debug);

  const proxy = client(RailProxyService, mesh.proxies[0]!.url);
  const proxy2 = client(RailProxyService, mesh.proxies[1]!.url);
  const rail = client(RailService, mesh.railStub.url);
  const control = client(RailControlService, `http://127.0.0.1:${mesh.railStub.ready!.controlPort}`);
  const lock = client(LockService, mesh.lock!.url);
  const payouts = client(PayoutService, mesh.payouts!.url);
  // The money path is walked as the payouts' holder walks it: each payout fenced for its request.
  const paydb = await db(mesh.dbUrl("paydb"));
  const held = (acc: string, payout: string, token: bigint) => fencedFor(paydb, request(acc, payout, token));
  const body = { clientReference: "sec-1", accountId: "a", beneficiary: "b", amount: { amountMinor: 1n, currency: "EUR" } };

  // Wrong and malformed credentials straight at the rail.
  for (const authorization of [
    undefined,
    "Bearer wrong",
    `Bearer ${wrongCredential}`,
    `Basic ${mesh.credential}`,
    `bearer ${mesh.credential}`,
    `Bearer ${mesh.credential}x`,
  ]) {
    const headers = authorization ? { authorization } : undefined;
    await observe("rail submit", rail.submitPayment(body, { headers }));
    await observe("rail list", rail.listPayments({}, { headers }));
  }
  // Bad input on every service.
  await observe("proxy invalid", proxy.submitPayout({ ...request("acc 1", "p", 0n) }));
  await observe("proxy oversized", proxy.submitPayout({ ...request("acc", "p", 1n), beneficiary: "x".repeat(70_000) }));
  await observe("proxy bad page token", proxy.listUnresolved({ pageToken: "garbage" }));
  await observe("proxy bad statement", proxy.getRailStatement({ since: { seconds: 1n << 60n, nanos: 0 } }));
  await observe("lock invalid", lock.acquire({ key: "", owner: "", ttlMs: 0, waitMs: 0 }));
  await observe("payouts no key", payouts.createPayout({ accountId: "a" }));
  // The money path, then rail faults: reject, land-then-lose (TIMEOUT), never-land hang.
  await observe("proxy ok", proxy.submitPayout(await held("acc-sec", "p-sec-ok", 1n)));
  // The rail's ACCEPTED closed p-sec-ok PAID (decision 072): it cannot be fenced again, so its
  // resubmission (same reference) and a newer holder's submission go to the proxy as a stale
  // holder would send them, to be refused.
  await observe("proxy duplicate", proxy2.submitPayout(request("acc-sec", "p-sec-ok", 1n)));
  await observe("proxy closed payout", proxy2.submitPayout(request("acc-sec", "p-sec-ok", 2n)));
  await observe("proxy fenced", proxy2.submitPayout(await held("acc-sec", "p-sec-stale", 1n)));
  await control.setFaults({
    rules: [
      { kind: FaultKind.REJECT, count: 1 },
      { kind: FaultKind.LAND_THEN_LOSE_ANSWER, count: 1 },
      { kind: FaultKind.NEVER_LAND_HANG, count: 1 },
    ],
  });
  await observe("rail reject", proxy.submitPayout(await held("acc-sec", "p-sec-rej", 3n)));
  await observe("rail lost answer", proxy.submitPayout(await held("acc-sec", "p-sec-lost", 4n)));
  await observe("rail hang", proxy2.submitPayout(await held("acc-sec", "p-sec-hang", 5n)));
  await control.setFaults({ rules: [] });
  // A newer holder of the payout whose answer was lost: its submission is still live.
  await observe("proxy already submitted", proxy.submitPayout(await held("acc-sec", "p-sec-lost", 6n)));
  await observe(
    "resolve",
    proxy.resolveSubmission({
      payoutId: "p-sec-lost",
      outcome: ResolutionOutcome.PAID,
      actor: "operator:test",
      note: "matched on statement",
      railReference: "rr_sec",
    }),
  );
  await observe("statement", proxy.getRailStatement({}));

  // A proxy holding the wrong credential: the rail refuses it.
  const wrongFile = join(tmp, "wrong-credential");
  writeFileSync(wrongFile, `${wrongCredential}\n`, { mode: 0o600 });
  const wrongProxy = proxyProcess("rail-proxy-wrong-credential", {
    PAYDB_URL: mesh.roleUrl("paydb", "rail-proxy"),
    RAIL_URL: mesh.railStub.url,
    RAIL_CREDENTIALS_FILE: wrongFile,
    REPLICA_ID: "wrong-cred",
  });
  await wrongProxy.start();
  await observe("wrong credential submit", client(RailProxyService, wrongProxy.url).submitPayout(await held("acc-sec-wrong", "p-sec-wrong", 1n)));
  await paydb.end();
  await observe("wrong credential statement", client(RailProxyService, wrongProxy.url).getRailStatement({}));

  // A proxy whose paydb (its own PostgreSQL, set up as a deployment has it) goes down.
  ownPg = await PostgresServer.start({ durable: false });
  const ownPaydb = await ownedDatabase(ownPg.url("postgres"), "paydb_secrets");
  await migrate(ownPaydb.migrateUrl, "paydb");
  await allowServiceLogins(ownPg.url("postgres"));
  // Both payouts fenced while that paydb is up, as their holder left them.
  const ownClient = await db(ownPaydb.url);
  const [down1, down2] = [request("acc-sec-down", "p-sec-down-1", 1n), request("acc-sec-down", "p-sec-down-2", 2n)];
  for (const r of [down1, down2]) await fencedFor(ownClient, r);
  await ownClient.end();
  const orphan = proxyProcess("rail-proxy-paydb-down", {
    PAYDB_URL: serviceUrl(ownPaydb.url, "rail-proxy"),
    RAIL_URL: mesh.railStub.url,
    RAIL_CREDENTIALS_FILE: mesh.credentialFile,
    REPLICA_ID: "paydb-down",
  });
  await orphan.start();
  const orphanClient = client(RailProxyService, orphan.url);
  await observe("before outage", orphanClient.submitPayout(down1));
  await ownPg.stop("immediate");
  await observe("paydb down submit", orphanClient.submitPayout(down2));
  await observe("paydb down get", orphanClient.getSubmission({ payoutId: "p-sec-down-1" }));
  await observe("paydb down list", orphanClient.listUnresolved({}));

  // Proxies that never start: bad config, each with the real credential file configured.
  const badConfigs: Array<[string, Record<string, string>]> = [
    ["bad rail url", { PAYDB_URL: mesh.roleUrl("paydb", "rail-proxy"), RAIL_URL: "not a url", RAIL_CREDENTIALS_FILE: mesh.credentialFile }],
    ["credential file is a directory", { PAYDB_URL: mesh.roleUrl("paydb", "rail-proxy"), RAIL_URL: mesh.railStub.url, RAIL_CREDENTIALS_FILE: tmp }],
    ["paydb unreachable", { PAYDB_URL: "postgres://nobody@127.0.0.1:1/paydb", RAIL_URL: mesh.railStub.url, RAIL_CREDENTIALS_FILE: mesh.credentialFile }],
    [
      "bad numbers",
      {
        PAYDB_URL: mesh.roleUrl("paydb", "rail-proxy"),
        RAIL_URL: mesh.railStub.url,
        RAIL_CREDENTIALS_FILE: mesh.credentialFile,
        RAIL_DEADLINE_MS: "-5",
        PAYDB_POOL_MAX: "lots",
      },
    ],
  ];
  for (const [name, env] of badConfigs) {
    const p = new ServiceProcess({
      service: "rail-proxy",
      name: `rail-proxy-${name.replace(/ /g, "-")}`,
      env: { PORT: "0", METRICS_PORT: "0", LOG_LEVEL: "debug", PAYDB_DURABILITY: "single-node", ...env },
      waitReady: false,
    });
    extra.push(p);
    await p.start();
    const code = await p.waitExit();
    expect(code, `${name} should fail start-up`).not.toBe(0);
    tally.record("bad-config", `exit_${code}`);
  }
}, 120_000);

afterAll(async () => {
  sessions.close();
  await Promise.all(extra.map((p) => p.stop(5000)));
  await mesh?.stop();
  await ownPg?.destroy();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tally.write();
});

const secrets = () => [mesh.credential, wrongCredential];
/** Lines containing any secret (or its base64, in case something encodes it). */
function leaks(lines: string[]): string[] {
  const needles = secrets().flatMap((s) => [s, Buffer.from(s).toString("base64"), Buffer.from(s).toString("base64url")]);
  return lines.filter((l) => needles.some((n) => l.includes(n)));
}

describe("the rail credential after every error path", () => {
  it("the scanner finds a planted credential (negative control)", () => {
    expect(leaks([`{"msg":"oops ${mesh.credential}"}`])).toHaveLength(1);
    expect(leaks([`token=${Buffer.from(wrongCredential).toString("base64")}`])).toHaveLength(1);
  });

  it("the error paths really ran: refusals of every kind were seen and logged", () => {
    const joined = seenByClients.join("\n");
    for (const code of ["Unauthenticated", "InvalidArgument", "AlreadyExists", "Aborted", "Unavailable"]) expect(joined).toContain(code);
    expect(seenByClients.find((l) => l.startsWith("proxy already submitted"))).toMatch(/^proxy already submitted AlreadyExists /);
    expect(seenByClients.find((l) => l.startsWith("proxy closed payout"))).toMatch(/^proxy closed payout FailedPrecondition .*PAYOUT_NOT_PAYABLE/);
    // The oversized request is invalid_argument REQUEST_TOO_LARGE since decision 053 (it was 429).
    expect(seenByClients.find((l) => l.startsWith("proxy oversized"))).toMatch(/^proxy oversized InvalidArgument .*REQUEST_TOO_LARGE/);
    const all = [...mesh.allLines(), ...extra.flatMap((p) => p.lines)];
    expect(all.some((l) => l.includes("RAIL_CREDENTIAL_INVALID"))).toBe(true);
    expect(all.some((l) => l.includes('"event":"startup_failed"'))).toBe(true);
    expect(all.some((l) => l.includes('"level":"debug"') || l.includes('"level":"info"'))).toBe(true);
  });

  it("never appears in any log line of any process", () => {
    const all = [...mesh.allLines(), ...extra.flatMap((p) => p.lines)];
    expect(all.length).toBeGreaterThan(30);
    tally.record("log-lines-scanned", String(all.length));
    expect(leaks(all)).toEqual([]);
  });

  it("never appears in anything a client was told (messages, metadata, error details)", () => {
    expect(seenByClients.length).toBeGreaterThan(20);
    expect(leaks(seenByClients)).toEqual([]);
  });

  it("never appears in any /metrics body", async () => {
    const ports = [...mesh.processes(), ...extra].filter((p) => p.running && p.ready).map((p) => p.ready!.metricsPort);
    expect(ports.length).toBeGreaterThanOrEqual(6);
    for (const port of ports) {
      const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(body.length).toBeGreaterThan(100);
      expect(leaks([body])).toEqual([]);
    }
  });

  it("is in no process's argv or environment (it comes from a 0600 file only)", () => {
    const running = [...mesh.processes(), ...extra].filter((p) => p.running && p.pid);
    expect(running.length).toBeGreaterThanOrEqual(6);
    for (const p of running) {
      const cmdline = readFileSync(`/proc/${p.pid}/cmdline`).toString("latin1");
      const environ = readFileSync(`/proc/${p.pid}/environ`).toString("latin1");
      expect(environ.length, `${p.name}: environment readable`).toBeGreaterThan(0);
      expect(leaks([cmdline, environ]), p.name).toEqual([]);
    }
    // The file the proxies read it from is 0600.
    expect(statSync(mesh.credentialFile).mode & 0o077).toBe(0);
  });
});
