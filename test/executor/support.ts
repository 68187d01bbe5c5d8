/**
 * Fixtures for the executor and reconciler tests: a mesh (rail-stub + rail-proxies on the run's
 * shared PostgreSQL) plus the lock service, direct paydb/raildb access for arranging payouts
 * and for reading the rail's own ledger (INV-02 is checked there, not in paydb), and helpers
 * to start executors and read their JSON log lines.
 */
import pg from "pg";
import type { Mesh } from "../../tools/harness/mesh.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import type { FaultRuleSchema } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { connectClient, proxyClient as proxyClientAt, railControl } from "../support/clients.js";

export interface PayoutSeed {
  payoutId: string;
  accountId: string;
  amountMinor?: bigint;
  currency?: string;
  beneficiary?: string;
  state?: "PENDING" | "PROCESSING" | "UNKNOWN";
}

/** Inserts payouts straight into paydb, as the payouts API would have (PENDING by default). */
export async function insertPayouts(pool: pg.Pool | pg.PoolClient, seeds: PayoutSeed[]): Promise<void> {
  for (let i = 0; i < seeds.length; i += 500) {
    const chunk = seeds.slice(i, i + 500);
    const values: unknown[] = [];
    const rows = chunk.map((s, j) => {
      values.push(
        s.payoutId,
        s.accountId,
        (s.amountMinor ?? 1000n).toString(),
        s.currency ?? "EUR",
        s.beneficiary ?? `ben-${s.accountId}`,
        s.state ?? "PENDING",
      );
      const b = j * 6;
      return `($${b + 1}, 'test-client', $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6})`;
    });
    await pool.query(`INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state) VALUES ${rows.join(", ")}`, values);
  }
}

export interface PayoutRow {
  payout_id: string;
  state: string;
  fence: string;
  rail_reference: string | null;
  failure_reason: string | null;
}

export async function payoutStates(pool: pg.Pool, ids: string[]): Promise<Map<string, PayoutRow>> {
  const { rows } = await pool.query<PayoutRow>("SELECT payout_id, state, fence, rail_reference, failure_reason FROM payouts WHERE payout_id = ANY($1)", [ids]);
  return new Map(rows.map((r) => [r.payout_id, r]));
}

/**
 * The payout a rail payment's client_reference belongs to, in SQL: the reference is the payout
 * id or an attempt reference `<payout id>:t<token>` (services/shared/domain/submission-ref.ts).
 */
export const PAYOUT_OF_REFERENCE = "regexp_replace(client_reference, ':t[0-9]{1,19}$', '')";

/**
 * Payments per payout on the rail's own ledger (raildb), under any reference of the payout: an
 * executor submits under `<payout id>:t<token>` when an earlier attempt was not forwarded, and
 * a payout paid once under each reference is paid twice.
 */
export async function railPaymentCounts(
  raildb: pg.Pool,
  payoutIds: string[],
  status: "ACCEPTED" | "REJECTED" | "ANY" = "ACCEPTED",
): Promise<Map<string, number>> {
  const { rows } = await raildb.query<{ payout_id: string; n: string }>(
    `SELECT ${PAYOUT_OF_REFERENCE} AS payout_id, count(*) AS n FROM payments
      WHERE ${PAYOUT_OF_REFERENCE} = ANY($1) AND ($2 = 'ANY' OR status = $2) GROUP BY 1`,
    [payoutIds, status],
  );
  const counts = new Map(payoutIds.map((r) => [r, 0]));
  for (const r of rows) counts.set(r.payout_id, Number(r.n));
  return counts;
}

export { logEvents, waitForLog, waitForLogs } from "../support/log-events.js";

/** Starts the lock service (pg backend, on the mesh's lockdb, as its own database role). */
export async function startLock(mesh: Mesh): Promise<ServiceProcess> {
  const lock = new ServiceProcess({
    service: "lock",
    env: { PORT: "0", METRICS_PORT: "0", LOCK_BACKEND: "pg", LOCKDB_URL: mesh.roleUrl("lockdb", "lock") },
  });
  await lock.start();
  return lock;
}

/** Starts one executor against the mesh's proxies and the lock service (paydb as the executor's role). */
export async function startExecutor(
  mesh: Mesh,
  lock: ServiceProcess,
  id: string,
  env: Record<string, string> = {},
  opts: { logDelayMs?: number } = {},
): Promise<ServiceProcess> {
  const executor = new ServiceProcess({
    service: "executor",
    name: id,
    ...opts,
    env: {
      METRICS_PORT: "0",
      PAYDB_URL: mesh.roleUrl("paydb", "executor"),
      LOCK_URL: lock.url,
      RAIL_PROXY_URLS: mesh.proxies.map((p) => p.url).join(","),
      EXECUTOR_ID: id,
      POLL_INTERVAL_MS: "50",
      LEASE_TTL_MS: "3000",
      LOCK_WAIT_MS: "1000",
      CALL_TIMEOUT_MS: "5000",
      DRAIN_MS: "2000",
      ...env,
    },
  });
  await executor.start();
  return executor;
}

export async function setFaults(mesh: Mesh, rules: MessageInitShape<typeof FaultRuleSchema>[]): Promise<void> {
  await railControl(mesh).setFaults({ rules });
}

export function lockClient(lock: ServiceProcess) {
  return connectClient(LockService, lock.url);
}

export function proxyClient(mesh: Mesh, replica = 0) {
  const p = mesh.proxies[replica];
  if (!p) throw new Error(`no proxy ${replica}`);
  return proxyClientAt(p.url);
}

export function poolFor(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  pool.on("error", () => {});
  return pool;
}
