/**
 * A payout is acknowledged only once its commit is on the synchronous standby (decision 038).
 *
 * CreatePayout is one explicit transaction (idempotency key + payout row). With the synchronous
 * standby away, its COMMIT waits; paydb's statement_timeout used to cancel that wait, and
 * PostgreSQL then answers the COMMIT with success and a WARNING: "committed locally, but might not
 * have been replicated". The payout was acknowledged to its client, and a failover to the standby
 * takes it back. Reproduced here on real streaming replication: primary and synchronous standby,
 * the replication link cut, statement_timeout 300 ms.
 *
 * - The store's COMMIT runs without the timeout: it answers only once the standby is back and has
 *   the row.
 * - Negative control (commitWaitsForStandby: false, the old COMMIT): acknowledged within the
 *   timeout while the standby does not have the row.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPayoutStore } from "../../services/payouts/payout-store.js";
import { createPool } from "../../services/shared/db/pg.js";
import { ReplicatedPaydb } from "../../tools/harness/replicated-paydb.js";
import { eventually } from "../support/time.js";

let paydb: ReplicatedPaydb;
let pool: pg.Pool;

beforeAll(async () => {
  paydb = await ReplicatedPaydb.start({ synchronous: true });
  const admin = new pg.Client({ connectionString: paydb.url("postgres") });
  await admin.connect();
  await admin.query("CREATE TABLE acknowledged (id text PRIMARY KEY)");
  await admin.end();
  await paydb.waitStandbyStreaming();
  pool = createPool({ url: paydb.url("postgres"), statementTimeoutMs: 300 });
}, 120_000);

afterAll(async () => {
  await pool?.end().catch(() => {});
  await paydb?.stop();
});

async function onStandby(id: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: paydb.standby.url("postgres") });
  await c.connect();
  try {
    return (await c.query("SELECT 1 FROM acknowledged WHERE id = $1", [id])).rowCount === 1;
  } finally {
    await c.end();
  }
}

/** Inserts `id` through the store's transaction; resolves with when it was acknowledged. */
function insert(id: string) {
  const store = createPayoutStore(pool);
  return store
    .withTransaction(async (tx) => {
      await tx.query("INSERT INTO acknowledged (id) VALUES ($1)", [id]);
      return "ok";
    })
    .then(
      () => ({ acknowledgedAt: Date.now() }),
      (err: Error) => ({ failed: err.message }),
    );
}

describe("CreatePayout's commit with the synchronous standby away", () => {
  it("is acknowledged only once the standby has it", async () => {
    paydb.cutReplication();
    const pending = insert("waits");
    const early = await Promise.race([pending, new Promise((r) => setTimeout(() => r("still waiting"), 1500))]);
    expect(early).toBe("still waiting");
    const reconnectedAt = Date.now();
    paydb.reconnectReplication();
    const outcome = await pending;
    expect(outcome).toHaveProperty("acknowledgedAt");
    expect((outcome as { acknowledgedAt: number }).acknowledgedAt).toBeGreaterThanOrEqual(reconnectedAt);
    expect(await onStandby("waits")).toBe(true);
  }, 60_000);

  it("negative control: cancelled while it waits, it is acknowledged while the standby does not have it", async () => {
    await paydb.waitStandbyStreaming();
    paydb.cutReplication();
    try {
      const pending = insert("lost");
      const admin = new pg.Client({ connectionString: paydb.primary.url("postgres") });
      await admin.connect();
      // The commit waits for the standby that no longer streams: cancel it once it is waiting.
      const cancelled = await eventually(
        async () => {
          const r = await admin.query("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
          return r.rowCount === 1 && r;
        },
        "the insert's commit waiting on SyncRep",
        10_000,
      );
      await admin.end();
      expect(cancelled.rowCount).toBe(1);
      const outcome = await Promise.race([pending, new Promise((r) => setTimeout(() => r("still waiting"), 1500))]);
      expect(outcome).toHaveProperty("acknowledgedAt");
      expect(await onStandby("lost")).toBe(false);
    } finally {
      paydb.reconnectReplication();
    }
  }, 60_000);
});
