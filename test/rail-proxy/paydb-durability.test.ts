/**
 * paydb's durability is declared, and a proxy declared `synchronous-standby` admits nothing while
 * no synchronous standby is attached (decision 024; issue: paydb failover). Real PostgreSQL with a
 * real streaming standby (the harness's makeStandby):
 *
 * - declared synchronous-standby, no synchronous standby: SubmitPayout is `unavailable
 *   PAYDB_NOT_DURABLE`, nothing is written (no intent, no mark) or forwarded; the gauge says 0;
 * - a standby attached and named in synchronous_standby_names: the same proxy admits and pays;
 * - the standby gone again: refused again (instead of hanging on a commit no standby acknowledges);
 * - negative control: the same paydb with no standby, declared single-node, admits (the check
 *   alone is what refused).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { eventually, metricValue, proxyClient } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";

let pgServer: PostgresServer;
let standby: PostgresServer | undefined;
let mesh: Mesh;
let declaredSync: ServiceProcess;
let declaredSingle: ServiceProcess;
let paydb: pg.Pool;

beforeAll(async () => {
  pgServer = await PostgresServer.start();
  mesh = testMesh({ postgres: pgServer, proxies: 0 });
  await mesh.start();
  // pg_stat_replication shows sync_state only to pg_monitor members: the proxy's login gets it,
  // as docs/deploy.md tells an operator declaring synchronous-standby to do.
  await asSuper("GRANT pg_monitor TO railfence_rail_proxy");
  declaredSync = await mesh.addProxy({ PAYDB_DURABILITY: "synchronous-standby", PAYDB_DURABILITY_CHECK_MS: "200", REPLICA_ID: "rail-proxy-sync" });
  declaredSingle = await mesh.addProxy({ PAYDB_DURABILITY: "single-node", REPLICA_ID: "rail-proxy-single" });
  paydb = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 2 });
  paydb.on("error", () => {});
});

afterAll(async () => {
  await paydb?.end();
  await mesh?.stop();
  await standby?.destroy();
  await pgServer?.destroy();
});

async function asSuper(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: pgServer.url("postgres") });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

let n = 0;
async function submit(proxy: ServiceProcess) {
  const i = ++n;
  const payoutId = `po-durable-${i}`;
  const accountId = `acc-durable-${i}`;
  const request = await fencedFor(paydb, { accountId, payoutId, fencingToken: 3n, amount: { amountMinor: 500n, currency: "EUR" }, beneficiary: "ben-durable" });
  const answer = await proxyClient(proxy.url)
    .submitPayout(request, { timeoutMs: 15_000 })
    .then(
      (ok) => ({ ok, err: undefined }),
      (e: unknown) => ({ ok: undefined, err: ConnectError.from(e) }),
    );
  const written = await paydb.query("SELECT 1 FROM rail_submissions WHERE bound_payout_id = $1 UNION ALL SELECT 1 FROM rail_high_water WHERE account_id = $2", [
    payoutId,
    accountId,
  ]);
  return { ...answer, written: written.rows.length };
}

const durableGauge = (p: ServiceProcess) => metricValue(p.ready!.metricsPort, "railfence_rail_proxy_paydb_durable");

describe("a proxy declared synchronous-standby", () => {
  it("refuses every admission while no synchronous standby is attached, admits once one is, and refuses again when it goes", async () => {
    const refused = await submit(declaredSync);
    expect(refused.err?.code, refused.err?.message).toBe(Code.Unavailable);
    expect(errorReason(refused.err)).toBe("PAYDB_NOT_DURABLE");
    expect(refused.written, "nothing written: no intent, no mark").toBe(0);
    expect(await durableGauge(declaredSync)).toBe(0);
    expect(await metricValue(declaredSync.ready!.metricsPort, "railfence_rail_proxy_not_durable_refusals_total")).toBe(1);

    // A real streaming standby, named synchronous.
    standby = await pgServer.makeStandby();
    await asSuper("ALTER SYSTEM SET synchronous_standby_names = '*'");
    await asSuper("SELECT pg_reload_conf()");
    await eventually(async () => (await durableGauge(declaredSync).catch(() => 0)) === 1, "the proxy to see the synchronous standby", 30_000);
    const admitted = await submit(declaredSync);
    expect(admitted.err?.message).toBeUndefined();
    expect(admitted.ok?.submission?.railReference).toMatch(/^rr_/);

    // The standby goes: a commit would now wait for it for ever; the proxy refuses instead.
    await standby.destroy();
    standby = undefined;
    await eventually(async () => (await durableGauge(declaredSync)) === 0, "the proxy to see the standby gone", 30_000);
    await asSuper("ALTER SYSTEM RESET synchronous_standby_names");
    await asSuper("SELECT pg_reload_conf()");
    const again = await submit(declaredSync);
    expect(errorReason(again.err), again.err?.message).toBe("PAYDB_NOT_DURABLE");
    expect(again.written).toBe(0);
  }, 120_000);

  it("negative control: the same paydb without a standby, declared single-node, admits", async () => {
    const ok = await submit(declaredSingle);
    expect(ok.err?.message).toBeUndefined();
    expect(ok.ok?.submission?.railReference).toMatch(/^rr_/);
    expect(await durableGauge(declaredSingle)).toBe(1);
  });

  it("an undeclared durability refuses to start, naming the choices", async () => {
    const env = mesh.proxyEnv(77);
    delete env.PAYDB_DURABILITY;
    const { ServiceProcess } = await import("../../tools/harness/service-process.js");
    const p = new ServiceProcess({ service: "rail-proxy", name: "rail-proxy-undeclared", env, waitReady: false });
    await p.start();
    expect(await p.waitExit()).toBe(78);
    expect(p.lines.join("\n")).toContain("declare paydb's durability: one of single-node, managed-ha, synchronous-standby");
  });
});
