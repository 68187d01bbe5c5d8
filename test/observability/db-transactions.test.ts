/**
 * railfence_db_transactions_total (services/shared/db/transaction-count.ts) counts what
 * pg_stat_database.xact_commit counts, per process: one transaction per statement run outside a
 * block, one per BEGIN..COMMIT/ROLLBACK block, by outcome. Against real PostgreSQL, on a database
 * of its own so that the server's own count can be compared with the pool's.
 */
import pg from "pg";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inject } from "vitest";
import { createPool } from "../../services/shared/db/pg.js";
import { DB_TRANSACTIONS_METRIC } from "../../services/shared/db/transaction-count.js";
import { uniqueSuffix } from "../support/test-mesh.js";
import { eventually } from "../support/time.js";

const admin = inject("pgUrl");
const dbName = `txcount${uniqueSuffix()}`;
const url = admin.replace(/\/[^/]*$/, `/${dbName}`);

async function adminQuery<R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  try {
    return (await c.query<R>(sql, values)).rows;
  } finally {
    await c.end();
  }
}

/** The counter's value for outcome (0 when the series does not exist yet). */
async function counted(registry: Registry, outcome: "commit" | "rollback"): Promise<number> {
  const metric = registry.getSingleMetric(DB_TRANSACTIONS_METRIC);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => v.labels.database === dbName && v.labels.outcome === outcome).reduce((s, v) => s + v.value, 0);
}

beforeAll(async () => {
  await adminQuery(`CREATE DATABASE ${dbName}`);
  const setup = createPool({ url });
  await setup.query("CREATE TABLE t (id int PRIMARY KEY)");
  await setup.end();
});

afterAll(async () => {
  await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
});

describe("railfence_db_transactions_total", () => {
  it("counts each autocommit statement once, prepared or not, and a failed one as a rollback", async () => {
    const registry = new Registry();
    const pool = createPool({ url, max: 2, registry });
    try {
      await pool.query("SELECT 1");
      await pool.query("INSERT INTO t (id) VALUES ($1)", [1]);
      await pool.query({ name: "count_t", text: "SELECT count(*) FROM t", values: [] });
      await pool.query({ name: "count_t", text: "SELECT count(*) FROM t", values: [] });
      const client = await pool.connect();
      await client.query("SELECT 2");
      client.release();
      await pool.query("INSERT INTO t (id) VALUES ($1)", [1]).catch(() => undefined); // duplicate key
      // A failed statement rejects on the error, before the server reports the connection idle.
      await eventually(async () => (await counted(registry, "rollback")) === 1, "the failed statement counted as a rollback");
      // Five statements, and the one connection's start-up (a transaction of its own in PostgreSQL).
      expect(await counted(registry, "commit")).toBe(1 + 5);
    } finally {
      await pool.end();
    }
  });

  it("counts a BEGIN..COMMIT block once however many statements it holds, and a rolled-back or failed block as one rollback", async () => {
    const registry = new Registry();
    const pool = createPool({ url, max: 2, registry });
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("INSERT INTO t (id) VALUES (10)");
      await client.query("INSERT INTO t (id) VALUES (11)");
      await client.query("SELECT * FROM t");
      await client.query("COMMIT");
      // The block, and the connection's start-up.
      expect(await counted(registry, "commit")).toBe(1 + 1);
      expect(await counted(registry, "rollback")).toBe(0);

      await client.query("BEGIN");
      await client.query("INSERT INTO t (id) VALUES (12)");
      await client.query("ROLLBACK");
      // A block whose statement failed: the server answers its COMMIT with ROLLBACK.
      await client.query("BEGIN");
      await client.query("INSERT INTO t (id) VALUES (10)").catch(() => undefined);
      await client.query("COMMIT");
      // One string holding a whole block is one transaction too.
      await client.query("BEGIN; INSERT INTO t (id) VALUES (13); COMMIT");
      expect(await counted(registry, "commit")).toBe(1 + 2);
      expect(await counted(registry, "rollback")).toBe(2);
    } finally {
      client.release();
      await pool.end();
    }
  });

  it("agrees with the server's own xact_commit and xact_rollback for the database (the pool's connections are all it has)", async () => {
    const stats = async () =>
      (
        await adminQuery<{ c: string; r: string }>("SELECT xact_commit::text AS c, xact_rollback::text AS r FROM pg_stat_database WHERE datname = $1", [dbName])
      )[0]!;
    // Earlier connections report their counts when their backends exit: wait until the counts are still.
    let before = JSON.stringify(await stats());
    await eventually(
      async () => {
        const now = JSON.stringify(await stats());
        const still = now === before;
        before = now;
        return still;
      },
      "earlier connections' statistics reported",
      { everyMs: 500 },
    );
    const atStart = await stats();
    const registry = new Registry();
    const pool = createPool({ url, max: 4, registry });
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        if (i % 3 === 0) {
          await pool.query("INSERT INTO t (id) VALUES ($1) ON CONFLICT DO NOTHING", [100 + i]);
          return;
        }
        const c = await pool.connect();
        try {
          await c.query("BEGIN");
          await c.query("INSERT INTO t (id) VALUES ($1) ON CONFLICT DO NOTHING", [100 + i]);
          await c.query("SELECT count(*) FROM t");
          await c.query(i % 3 === 1 ? "COMMIT" : "ROLLBACK");
        } finally {
          c.release();
        }
      }),
    );
    await pool.query("SELECT 1/0").catch(() => undefined);
    const rollbacks = await eventually(async () => (await counted(registry, "rollback")) === 13 + 1 && 13 + 1, "13 blocks and a statement rolled back");
    const commits = await counted(registry, "commit");
    // A backend reports its counts when it exits: ending the pool makes the server's counts final.
    await pool.end();
    const server = await eventually(
      async () => {
        const now = await stats();
        const grown = { commits: Number(now.c) - Number(atStart.c), rollbacks: Number(now.r) - Number(atStart.r) };
        return grown.commits >= commits && grown.rollbacks >= rollbacks && grown;
      },
      `the server's counts of ${dbName} grew`,
      { everyMs: 200 },
    );
    expect(server).toEqual({ commits, rollbacks });
  });
});
