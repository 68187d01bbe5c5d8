/**
 * Fixtures for the client-library tests: a real payouts process on its own PostgreSQL (tests
 * stop it), the library built from clients/typescript/src, what the server saw (its rpc_error
 * log lines), and a lock on the payouts table that holds a CreatePayout mid-transaction.
 */
import pg from "pg";
import { PostgresServer } from "../../tools/harness/postgres.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { createRailfenceClient, type RailfenceClientOptions } from "../../clients/typescript/src/index.js";
import { createPaydb, startPayouts } from "../payouts/support.js";

export { countPayouts, sql, metric, newKey } from "../payouts/support.js";

export interface PayoutsFixture {
  pg: PostgresServer;
  paydb: string;
  svc: ServiceProcess;
  stop(): Promise<void>;
}

/** Its own PostgreSQL (so a test can stop it) and one payouts process. */
export async function payoutsOnOwnPostgres(env: Record<string, string> = {}): Promise<PayoutsFixture> {
  const server = await PostgresServer.start({ durable: false });
  const paydb = await createPaydb(server.url("postgres"));
  const svc = await startPayouts(paydb, { IDEMPOTENCY_LOCK_MS: "1500", ...env });
  return {
    pg: server,
    paydb,
    svc,
    async stop() {
      await svc.stop(5000);
      await server.destroy();
    },
  };
}

/** A library client on the fixture, with small waits so tests stay quick; close() it. */
export function library(url: string, o: Partial<RailfenceClientOptions> = {}) {
  return createRailfenceClient({
    payoutsUrl: url,
    deadlineMs: 30_000,
    timeoutMs: 5000,
    retry: { baseDelayMs: 50, maxDelayMs: 500, maxAttempts: 50, budget: false },
    ...o,
  });
}

/** CreatePayout refusals the server logged (one line per refused attempt), by reason. */
export function refusals(svc: ServiceProcess, reason?: string): Array<{ time: string; reason: string; code: string }> {
  return svc.lines
    .filter((l) => l.includes('"event":"rpc_error"') && l.includes("CreatePayout"))
    .map((l) => JSON.parse(l) as { time: string; reason: string; code: string })
    .filter((e) => reason === undefined || e.reason === reason);
}

/**
 * Holds every payout insert: a transaction with the payouts table locked. A CreatePayout then
 * claims its key and waits inside its transaction until release() (commit) is called.
 */
export async function holdPayoutInserts(paydb: string): Promise<{ release(): Promise<void> }> {
  const c = new pg.Client({ connectionString: paydb });
  await c.connect();
  c.on("error", () => {});
  await c.query("BEGIN");
  await c.query("LOCK TABLE payouts IN EXCLUSIVE MODE");
  return {
    async release() {
      await c.query("COMMIT").catch(() => {});
      await c.end().catch(() => {});
    },
  };
}

/**
 * Resolves when the request for key is inside the server: its IN_PROGRESS marker (the stepwise
 * CreatePayout), or its key's advisory lock held by the one-statement CreatePayout (migration 022:
 * class 1920167987, hashtext(client || '/' || key)) for the default client or any client paydb knows.
 */
export async function claimed(paydb: string, key: string): Promise<void> {
  const { eventually } = await import("../support/clients.js");
  const { sql } = await import("../payouts/support.js");
  await eventually(
    async () =>
      (
        await sql(
          paydb,
          `SELECT 1 FROM idempotency_keys WHERE idempotency_key = $1 AND state = 'IN_PROGRESS'
           UNION ALL
           SELECT 1 FROM pg_locks l,
                  (SELECT 'local-default' AS client UNION SELECT client_id FROM payouts UNION SELECT client_id FROM idempotency_keys) ids
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1920167987 AND l.objsubid = 2
              AND l.objid = (hashtext(ids.client || '/' || $1)::bigint & 4294967295)::oid`,
          [key],
        )
      ).length > 0,
    `key ${key} claimed`,
  );
}
