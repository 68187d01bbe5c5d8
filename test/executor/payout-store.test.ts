/**
 * The executor's paydb layer against real PostgreSQL: claims never overlap, and the C1 §1.6
 * fence refuses every write carrying a token older than the row's fence — the guard that holds
 * however stale the executor is (INV-07: paydb enforces it, not the executor).
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { createPayoutStore, type PayoutStore } from "../../services/executor/payout-store.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { createPool } from "../../services/shared/db/pg.js";
import { uniqueSuffix } from "../support/test-mesh.js";
import { allowServiceLogins, serviceUrl } from "../../tools/harness/database-roles.js";
import { insertPayouts, payoutStates } from "./support.js";
import { letTimePass } from "../support/time.js";

/** The owner's pool arranges fixtures; the store runs as the executor's own role, as in production. */
let pool: pg.Pool;
let executorPool: pg.Pool;
let store: PayoutStore;
const admin = inject("pgUrl");
const dbName = `paydb_store${uniqueSuffix()}`;
/** This paydb has no signing key installed (token signing off): fences carry no signature. */
const UNSIGNED = new Uint8Array();

beforeAll(async () => {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${dbName}`);
  await c.end();
  const url = admin.replace(/\/[^/]*$/, `/${dbName}`);
  await migrate(url, "paydb");
  await allowServiceLogins(admin);
  pool = createPool({ url, max: 8 });
  executorPool = createPool({ url: serviceUrl(url, "executor"), max: 8 });
  store = createPayoutStore(executorPool);
});

afterAll(async () => {
  await executorPool?.end();
  await pool?.end();
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await c.end();
});

describe("executor payout store", () => {
  it("concurrent claims never hand the same payout to two executors", async () => {
    await insertPayouts(
      pool,
      Array.from({ length: 60 }, (_, i) => ({ payoutId: `po-claim-${i}`, accountId: `acc-claim-${i % 7}` })),
    );
    const batches = await Promise.all(Array.from({ length: 6 }, (_, i) => store.claim(`exec-${i}`, 15, 10_000)));
    const all = batches
      .flat()
      .map((p) => p.payoutId)
      .filter((id) => id.startsWith("po-claim-"));
    expect(new Set(all).size).toBe(all.length);
    expect(all.length).toBe(60);
    // Claimed payouts are not claimable again until the claim lapses.
    expect((await store.claim("exec-late", 100, 10_000)).filter((p) => p.payoutId.startsWith("po-claim-"))).toEqual([]);
  });

  it("a lapsed PROCESSING claim can be taken over", async () => {
    await insertPayouts(pool, [{ payoutId: "po-lapse-1", accountId: "acc-lapse" }]);
    const first = (await store.claim("exec-a", 100, 1)).find((p) => p.payoutId === "po-lapse-1");
    expect(first).toBeDefined();
    expect(await store.fence("po-lapse-1", 3n, UNSIGNED, "exec-a", 1)).toEqual({ previousFence: 0n });
    await letTimePass(20, "the 1 ms claim lapses");
    const again = (await store.claim("exec-b", 100, 10_000)).find((p) => p.payoutId === "po-lapse-1");
    expect(again).toMatchObject({ state: "PROCESSING", fence: 3n });
  });

  it("the fence admits only strictly newer tokens and refuses stale outcome writes", async () => {
    await insertPayouts(pool, [{ payoutId: "po-fence-1", accountId: "acc-fence" }]);
    expect(await store.fence("po-fence-1", 5n, UNSIGNED, "exec-a", 10_000)).toEqual({ previousFence: 0n });
    expect(await store.fence("po-fence-1", 5n, UNSIGNED, "exec-b", 10_000)).toBeUndefined();
    expect(await store.fence("po-fence-1", 4n, UNSIGNED, "exec-b", 10_000)).toBeUndefined();
    expect(await store.fence("po-fence-1", 7n, UNSIGNED, "exec-b", 10_000)).toEqual({ previousFence: 5n });
    // The holder of token 5 is stale now: its outcome touches nothing.
    expect(await store.recordOutcome("po-fence-1", 5n, { state: "PAID", railReference: "rr_stale" })).toBeUndefined();
    expect((await payoutStates(pool, ["po-fence-1"])).get("po-fence-1")).toMatchObject({ state: "PROCESSING", fence: "7", rail_reference: null });
    const written = await store.recordOutcome("po-fence-1", 7n, { state: "PAID", railReference: "rr_1" });
    expect(written?.ageSeconds).toBeGreaterThanOrEqual(0);
    // A finished payout can no longer be fenced, and UNKNOWN never overwrites PAID.
    expect(await store.fence("po-fence-1", 9n, UNSIGNED, "exec-c", 10_000)).toBeUndefined();
    expect(await store.recordOutcome("po-fence-1", 9n, { state: "UNKNOWN" })).toBeUndefined();
    expect((await payoutStates(pool, ["po-fence-1"])).get("po-fence-1")).toMatchObject({ state: "PAID", rail_reference: "rr_1" });
  });

  it("deferring gives back only the executor's own claim, never a newer holder's", async () => {
    await insertPayouts(pool, [{ payoutId: "po-defer-1", accountId: "acc-defer" }]);
    await store.fence("po-defer-1", 2n, UNSIGNED, "exec-a", 10_000);
    await store.fence("po-defer-1", 3n, UNSIGNED, "exec-b", 10_000);
    await store.deferClaim("po-defer-1", "exec-a", 2n, 0);
    const { rows } = await pool.query<{ claimed_by: string | null }>("SELECT claimed_by FROM payouts WHERE payout_id = 'po-defer-1'");
    expect(rows[0]?.claimed_by).toBe("exec-b");
  });
});
