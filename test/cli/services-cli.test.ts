/**
 * The compiled CLI against the payouts and lock services and the reconciler, as real
 * processes on a real mesh: create/get/list payouts with the Idempotency-Key contract,
 * inspect a held lock, and `railfence reconcile` (dry run, then for real) closing an
 * ambiguous submission made by a real lost rail answer.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { connectClient, db, expectRejected, FaultKind, proxyClient, railBookings, railControl } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";
import { railfence } from "./run-railfence.js";

let mesh: Mesh;
let paydb: pg.Client;
let raildb: pg.Client;
let payouts: ServiceProcess;
let lock: ServiceProcess;
let cwd: string;
let endpointArgs: string[];
const suffix = Date.now().toString(36);
/**
 * The proxy's timing, which the reconciler is told too: its settlement window must outlast
 * 2 x deadline + margin + admission timeout (2 x 1000 + 5000 + 5000 ms, the last two the defaults).
 */
const PROXY_TIMING = { RAIL_DEADLINE_MS: "1000" };
const SETTLEMENT_WINDOW_MS = "12001";

const cli = (args: string[], input?: string, env?: Record<string, string>) => railfence([...args, ...endpointArgs], { cwd, input, env });

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, proxyEnv: PROXY_TIMING });
  await mesh.start();
  payouts = new ServiceProcess({ service: "payouts", env: { PORT: "0", METRICS_PORT: "0", PAYDB_URL: mesh.roleUrl("paydb", "payouts") } });
  lock = new ServiceProcess({ service: "lock", env: { PORT: "0", METRICS_PORT: "0", LOCK_BACKEND: "pg", LOCKDB_URL: mesh.roleUrl("lockdb", "lock") } });
  await Promise.all([payouts.start(), lock.start()]);
  paydb = await db(mesh.dbUrl("paydb"));
  raildb = await db(mesh.databases.raildb);
  cwd = mkdtempSync(join(tmpdir(), "railfence-cli-svc-"));
  // --paydb is for `reconcile` only: the reconciler it starts logs in as the reconciler.
  endpointArgs = ["--payouts", payouts.url, "--lock", lock.url, "--rail-proxy", mesh.proxies[0]!.url, "--paydb", mesh.roleUrl("paydb", "reconciler")];
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await Promise.all([payouts?.stop(5000), lock?.stop(5000)]);
  await mesh?.stop();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

const createArgs = (account: string, amount = "1050") => [
  "payouts",
  "create",
  "--account",
  account,
  "--amount",
  amount,
  "--currency",
  "EUR",
  "--beneficiary",
  "ben-001",
];

describe("payouts", () => {
  it("create mints and prints an Idempotency-Key; retrying with it replays the same payout", async () => {
    const account = `acc-create-${suffix}`;
    const first = await cli([...createArgs(account), "--json"]);
    expect(first.code).toBe(0);
    const a = JSON.parse(first.stdout);
    expect(a.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    // stdout is the one result object; stderr only the key, written before the call.
    expect(first.stderr).toBe(`${JSON.stringify({ idempotencyKey: a.idempotencyKey })}\n`);
    expect(a.replayed).toBe(false);
    expect(a.payout).toMatchObject({ accountId: account, state: "PAYOUT_STATE_PENDING", amount: { amountMinor: "1050", currency: "EUR" } });

    const retry = await cli([...createArgs(account), "--json", "--idempotency-key", a.idempotencyKey]);
    expect(retry.code).toBe(0);
    const b = JSON.parse(retry.stdout);
    expect(b.replayed).toBe(true);
    expect(b.payout.payoutId).toBe(a.payout.payoutId);
    const { rows } = await paydb.query("SELECT count(*)::int AS n FROM payouts WHERE account_id = $1", [account]);
    expect(rows[0].n).toBe(1);
  });

  it("the human form shows the minted key on stderr before the call", async () => {
    const r = await cli(createArgs(`acc-human-${suffix}`));
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^idempotency-key: [0-9a-f-]{36} \(retry with --idempotency-key /);
    expect(r.stdout).toMatch(/^created$/m);
    expect(r.stdout).toMatch(/^amount\s+10\.50 EUR$/m);
  });

  it("a key reused for a different body exits 1 with IDEMPOTENCY_KEY_REUSED and creates nothing", async () => {
    const account = `acc-reuse-${suffix}`;
    const key = `key-${suffix}-reuse`;
    expect((await cli([...createArgs(account, "100"), "--idempotency-key", key])).code).toBe(0);
    const r = await cli([...createArgs(account, "200"), "--idempotency-key", key]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("invalid_argument IDEMPOTENCY_KEY_REUSED");
    expect(r.stderr).toContain(`--idempotency-key ${key}`);
    const { rows } = await paydb.query("SELECT count(*)::int AS n FROM payouts WHERE account_id = $1", [account]);
    expect(rows[0].n).toBe(1);
  });

  it("get and list read payouts; an unknown payout exits 4", async () => {
    const account = `acc-read-${suffix}`;
    const created = JSON.parse((await cli([...createArgs(account), "--json"])).stdout);
    const id = created.payout.payoutId as string;
    const got = await cli(["payouts", "get", id, "--json"]);
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout).payout.payoutId).toBe(id);
    const listed = await cli(["payouts", "list", "--account", account, "--state", "pending", "--json"]);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout).payouts as Array<{ payoutId: string }>).map((p) => p.payoutId)).toEqual([id]);
    const none = await cli(["payouts", "list", "--account", account, "--state", "PAID"]);
    expect(none.stdout.trim()).toBe("no payouts");
    const missing = await cli(["payouts", "get", `po-missing-${suffix}`]);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain("PAYOUT_NOT_FOUND");
  });

  it("an unreachable payouts service exits 3 and still prints the key to retry with", async () => {
    const r = await railfence([...createArgs(`acc-down-${suffix}`), "--payouts", "http://127.0.0.1:1"], { cwd });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/to retry safely, repeat the command with --idempotency-key [0-9a-f-]{36}/);
    const j = await railfence([...createArgs(`acc-down-${suffix}`), "--payouts", "http://127.0.0.1:1", "--json", "--idempotency-key", `key-${suffix}-down`], {
      cwd,
    });
    expect(j.code).toBe(3);
    const [keyLine, ...errorObject] = j.stderr.split("\n");
    expect(JSON.parse(keyLine!)).toEqual({ idempotencyKey: `key-${suffix}-down` });
    expect(JSON.parse(errorObject.join("\n")).error).toMatchObject({ code: "unavailable", outcome: "unreachable", idempotencyKey: `key-${suffix}-down` });
  });
});

describe("locks inspect", () => {
  it("shows the holder and token of a held lock, never its lease id", async () => {
    const key = `account:acc-lock-${suffix}`;
    const client = connectClient(LockService, lock.url);
    const { lease } = await client.acquire({ key, owner: "executor-7", ttlMs: 60_000, waitMs: 0 });
    try {
      const r = await cli(["locks", "inspect", key, "--json"]);
      expect(r.code).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j).toMatchObject({ key, held: true, owner: "executor-7", fencingToken: lease!.fencingToken.toString() });
      expect(r.stdout).not.toContain(lease!.leaseId);
      const human = await cli(["locks", "inspect", key]);
      expect(human.stdout).toMatch(/^held\s+yes$/m);
      expect(human.stdout).toMatch(/^owner\s+executor-7$/m);
    } finally {
      await client.release({ key, leaseId: lease!.leaseId });
    }
    const free = await cli(["locks", "inspect", `account:acc-free-${suffix}`, "--json"]);
    expect(JSON.parse(free.stdout)).toMatchObject({ held: false, owner: "" });
  });
});

describe("reconcile", () => {
  it("--dry-run changes nothing; a real run resolves the lost-answer payment as PAID", async () => {
    const created = JSON.parse((await cli([...createArgs(`acc-rec-${suffix}`), "--json"])).stdout);
    const payoutId = created.payout.payoutId as string;
    // Act as the executor would: fence the payout, submit it; the rail books it and the answer is lost.
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, count: 1, clientReferencePrefix: payoutId }] });
    await expectRejected(
      proxyClient(mesh.proxies[0]!.url).submitPayout(
        await fencedFor(paydb, {
          accountId: `acc-rec-${suffix}`,
          payoutId,
          fencingToken: 1n,
          amount: { amountMinor: 1050n, currency: "EUR" },
          beneficiary: "ben-001",
        }),
      ),
      Code.Aborted,
      "RAIL_AMBIGUOUS",
    );
    await railControl(mesh).setFaults({ rules: [] });
    expect(await railBookings(raildb, payoutId)).toBe(1);
    const state = async () => (await paydb.query("SELECT state, resolution_actor FROM rail_submissions WHERE payout_id = $1", [payoutId])).rows[0];

    const dry = await cli(["reconcile", "--dry-run", "--settlement-window-ms", SETTLEMENT_WINDOW_MS], undefined, PROXY_TIMING);
    expect(dry.code, dry.stderr + dry.stdout).toBe(0);
    expect(dry.stdout + dry.stderr).toContain("reconcile_summary");
    expect((await state()).state).toBe("TIMEOUT");

    const real = await cli(["reconcile", "--settlement-window-ms", SETTLEMENT_WINDOW_MS], undefined, PROXY_TIMING);
    expect(real.code, real.stderr + real.stdout).toBe(0);
    expect(await state()).toMatchObject({ state: "RESOLVED_PAID", resolution_actor: "reconciler" });
    expect(await railBookings(raildb, payoutId)).toBe(1);
  });

  it("a reconciler that cannot start passes its exit code through (78: bad config)", async () => {
    const r = await railfence(["reconcile", "--paydb", mesh.roleUrl("paydb", "reconciler"), "--rail-proxy", mesh.proxies[0]!.url], {
      cwd,
      env: { RECONCILER_ACTOR: "" },
    });
    expect(r.code).toBe(78);
  });
});
