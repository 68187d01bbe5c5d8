/**
 * paydb access for payouts: the only layer of this service that knows the `payouts` table.
 * Executors own every later change of a payout (claim, fence, outcome); this service only
 * inserts PENDING rows and reads them back, always scoped to the owning client.
 */
import type { Pool, PoolClient } from "../shared/db/pg.js";

/** A pool or a client inside an open transaction. */
export type Queryable = Pool | PoolClient;

export type PayoutStateName = "PENDING" | "PROCESSING" | "PAID" | "FAILED" | "UNKNOWN" | "NEEDS_ATTENTION";

export interface PayoutRow {
  payout_id: string;
  client_id: string;
  account_id: string;
  amount_minor: string;
  currency: string;
  beneficiary: string;
  client_reference: string;
  state: PayoutStateName;
  fence: string;
  rail_reference: string | null;
  failure_reason: string | null;
  attention_reason: string | null;
  attention_detail: string | null;
  attention_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** created_at with microseconds, UTC, for keyset paging (a JS Date keeps only milliseconds). */
  cursor: string;
}

export interface NewPayout {
  payoutId: string;
  clientId: string;
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
  clientReference: string;
  traceparent: string | null;
  /** The key of the CreatePayout that creates it: kept on the payout after the key row is purged. */
  idempotencyKey: string;
}

/** Keyset position: the last row of the previous page. */
export interface PageCursor {
  createdAt: string;
  payoutId: string;
}

const COLUMNS = `payout_id, client_id, account_id, amount_minor, currency, beneficiary, client_reference, state, fence,
  rail_reference, failure_reason, attention_reason, attention_detail, attention_at, created_at, updated_at,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor`;

export function createPayoutStore(pool: Pool) {
  return {
    /** Runs fn in one transaction on one client; rolls back on any error. */
    async withTransaction<T>(fn: (tx: PoolClient) => Promise<T | typeof ROLLBACK>): Promise<T | typeof ROLLBACK> {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query("BEGIN");
        const result = await fn(client);
        await client.query(result === ROLLBACK ? "ROLLBACK" : "COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
        throw err;
      } finally {
        client.release(broken);
      }
    },

    /** Inserts a PENDING payout (inside the caller's transaction). */
    async insert(q: Queryable, p: NewPayout): Promise<PayoutRow> {
      // Named: prepared once per connection (every CreatePayout runs it).
      const { rows } = await q.query<PayoutRow>({
        name: "payouts_insert",
        text: `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, client_reference, traceparent, idempotency_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${COLUMNS}`,
        values: [p.payoutId, p.clientId, p.accountId, p.amountMinor.toString(), p.currency, p.beneficiary, p.clientReference, p.traceparent, p.idempotencyKey],
      });
      return rows[0]!;
    },

    async get(clientId: string, payoutId: string): Promise<PayoutRow | undefined> {
      const { rows } = await pool.query<PayoutRow>(`SELECT ${COLUMNS} FROM payouts WHERE client_id = $1 AND payout_id = $2`, [clientId, payoutId]);
      return rows[0];
    },

    /**
     * The caller's payout created with this idempotency key. A key is free again after its
     * retention, so it may name several payouts over time: the newest is the one the key last made.
     */
    async getByKey(clientId: string, key: string): Promise<PayoutRow | undefined> {
      const { rows } = await pool.query<PayoutRow>(
        `SELECT ${COLUMNS} FROM payouts WHERE client_id = $1 AND idempotency_key = $2 ORDER BY created_at DESC, payout_id DESC LIMIT 1`,
        [clientId, key],
      );
      return rows[0];
    },

    /** Up to two of the caller's payouts with this client reference (two: the reference is ambiguous). */
    async getByClientReference(clientId: string, reference: string): Promise<PayoutRow[]> {
      const { rows } = await pool.query<PayoutRow>(
        `SELECT ${COLUMNS} FROM payouts WHERE client_id = $1 AND client_reference = $2 ORDER BY created_at DESC, payout_id DESC LIMIT 2`,
        [clientId, reference],
      );
      return rows;
    },

    /** Newest first, keyset-paged on (created_at, payout_id) so pages never skip or repeat rows. */
    async list(clientId: string, filter: { accountId?: string; state?: PayoutStateName }, limit: number, after?: PageCursor): Promise<PayoutRow[]> {
      const { rows } = await pool.query<PayoutRow>(
        `SELECT ${COLUMNS} FROM payouts
          WHERE client_id = $1
            AND ($2::text IS NULL OR account_id = $2)
            AND ($3::text IS NULL OR state = $3)
            AND ($4::timestamptz IS NULL OR (created_at, payout_id) < ($4::timestamptz, $5::text))
          ORDER BY created_at DESC, payout_id DESC
          LIMIT $6`,
        [clientId, filter.accountId ?? null, filter.state ?? null, after?.createdAt ?? null, after?.payoutId ?? "", limit],
      );
      return rows;
    },

    /**
     * Start-up check: a primary, and a schema that has this service's migrations. Failing here
     * (exit 70) is clearer than failing every request with "column does not exist".
     */
    async checkReady(): Promise<void> {
      const { rows } = await pool.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r");
      if (rows[0]?.r !== false) throw new Error("paydb is a standby (pg_is_in_recovery() = true); payouts only runs against a primary");
      try {
        await pool.query("SELECT claim_id FROM idempotency_keys LIMIT 0");
        await pool.query("SELECT used FROM payout_limit_usage LIMIT 0");
        await pool.query("SELECT idempotency_key FROM payouts LIMIT 0");
        await pool.query("SELECT pass_at FROM reconciler_last_pass LIMIT 0");
      } catch (err) {
        throw new Error(`paydb schema is not migrated (run: node dist/services/migrate/main.js paydb): ${(err as Error).message}`);
      }
    },
  };
}

/** Returned by a transaction body to roll back without throwing. */
export const ROLLBACK: unique symbol = Symbol("rollback");

export type PayoutStore = ReturnType<typeof createPayoutStore>;
