/**
 * paydb access for Idempotency-Key markers: the only layer that knows the `idempotency_keys`
 * table. Every statement is keyed by (client_id, idempotency_key), so one client never sees
 * another's marker. No statement ever waits on another request's row lock:
 *
 * - claim: `INSERT .. ON CONFLICT DO NOTHING` commits the IN_PROGRESS marker by itself, before
 *   any work starts (the claim-row pattern): a second request sees a committed marker and
 *   answers at once instead of queueing behind the first request's transaction;
 * - inspect: a plain MVCC read, never blocks;
 * - take over: the row is locked with `FOR UPDATE SKIP LOCKED`: if someone else holds it, we
 *   skip it and report a conflict rather than wait.
 */
import type { Pool } from "../shared/db/pg.js";
import type { Queryable } from "./payout-store.js";

export interface KeyRow {
  state: "IN_PROGRESS" | "DONE";
  fingerprint: Buffer;
  response: Buffer | null;
  /** The IN_PROGRESS lease is still running (meaningless for DONE). */
  locked: boolean;
  /** Milliseconds left on the lease (0 when expired). */
  lock_remaining_ms: number;
  /** Within retention: the key is still bound to its first body and answer (DONE rows). */
  live: boolean;
  /** When the server forgets the key (what purge and `live` go by). */
  expires_at: Date;
}

export interface ClaimParams {
  clientId: string;
  key: string;
  fingerprint: Buffer;
  claimId: string;
  lockMs: number;
  retentionMs: number;
}

const ms = (param: string) => `make_interval(secs => ${param}::float8 / 1000)`;

export function createIdempotencyStore(pool: Pool) {
  return {
    /** Inserts a fresh IN_PROGRESS marker. False when the key already has a row. */
    async tryInsert(p: ClaimParams): Promise<boolean> {
      // Named (here and in markDone): prepared once per connection; every CreatePayout runs both.
      const res = await pool.query({
        name: "payouts_key_insert",
        text: `INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, state, claim_id, locked_until, expires_at)
         VALUES ($1, $2, $3, 'IN_PROGRESS', $4, now() + ${ms("$5")}, now() + ${ms("$6")})
         ON CONFLICT (client_id, idempotency_key) DO NOTHING`,
        values: [p.clientId, p.key, p.fingerprint, p.claimId, p.lockMs, p.retentionMs],
      });
      return res.rowCount === 1;
    },

    async inspect(clientId: string, key: string): Promise<KeyRow | undefined> {
      const { rows } = await pool.query<KeyRow>(
        `SELECT state, fingerprint, response,
                coalesce(locked_until > now(), false) AS locked,
                greatest(0, coalesce(extract(epoch FROM locked_until - now()) * 1000, 0))::float8 AS lock_remaining_ms,
                expires_at > now() AS live, expires_at
           FROM idempotency_keys WHERE client_id = $1 AND idempotency_key = $2`,
        [clientId, key],
      );
      return rows[0];
    },

    /**
     * Takes over a key whose IN_PROGRESS lease expired (its request crashed) or whose retention
     * ended. The conditions are re-checked on the locked, latest row version, so two requests
     * racing for the same dead marker cannot both win. False: not eligible, or someone else
     * holds the row right now.
     */
    async takeOver(p: ClaimParams): Promise<boolean> {
      const res = await pool.query(
        `UPDATE idempotency_keys
            SET fingerprint = $3, state = 'IN_PROGRESS', response = NULL, payout_id = NULL, claim_id = $4,
                locked_until = now() + ${ms("$5")}, created_at = now(), expires_at = now() + ${ms("$6")}
          WHERE client_id = $1
            AND idempotency_key = (
              SELECT idempotency_key FROM idempotency_keys
               WHERE client_id = $1 AND idempotency_key = $2
                 AND ((state = 'DONE' AND expires_at <= now()) OR (state = 'IN_PROGRESS' AND locked_until <= now()))
               FOR UPDATE SKIP LOCKED)`,
        [p.clientId, p.key, p.fingerprint, p.claimId, p.lockMs, p.retentionMs],
      );
      return res.rowCount === 1;
    },

    /**
     * Pins the answer to the key, inside the transaction that inserted the payout. Only the
     * holder of the current claim can do it: null means our lease was taken over and the
     * caller must roll back (someone else is creating this payout). Else: when the key expires.
     */
    async markDone(
      q: Queryable,
      p: { clientId: string; key: string; claimId: string; response: Uint8Array; payoutId: string; retentionMs: number },
    ): Promise<Date | null> {
      const res = await q.query<{ expires_at: Date }>({
        name: "payouts_key_done",
        text: `UPDATE idempotency_keys
            SET state = 'DONE', response = $4, payout_id = $5, locked_until = NULL, expires_at = now() + ${ms("$6")}
          WHERE client_id = $1 AND idempotency_key = $2 AND claim_id = $3 AND state = 'IN_PROGRESS'
          RETURNING expires_at`,
        values: [p.clientId, p.key, p.claimId, Buffer.from(p.response), p.payoutId, p.retentionMs],
      });
      return res.rows[0]?.expires_at ?? null;
    },

    /**
     * Errors are not pinned: a failed attempt deletes its own marker (and only its own). True when
     * it did: the marker was still IN_PROGRESS, so the attempt's payout was never committed (the
     * payout and the DONE update commit together).
     */
    async release(clientId: string, key: string, claimId: string): Promise<boolean> {
      const res = await pool.query(`DELETE FROM idempotency_keys WHERE client_id = $1 AND idempotency_key = $2 AND claim_id = $3 AND state = 'IN_PROGRESS'`, [
        clientId,
        key,
        claimId,
      ]);
      return res.rowCount === 1;
    },

    /**
     * Deletes up to `batch` keys past retention. A marker whose lease is still running is left
     * alone even past retention (its request may still be completing; it will expire soon).
     */
    async purgeExpired(batch: number): Promise<number> {
      const res = await pool.query(
        `DELETE FROM idempotency_keys k
          USING (SELECT client_id, idempotency_key FROM idempotency_keys
                  WHERE expires_at <= now() AND (state = 'DONE' OR locked_until <= now())
                  ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) doomed
          WHERE k.client_id = doomed.client_id AND k.idempotency_key = doomed.idempotency_key`,
        [batch],
      );
      return res.rowCount ?? 0;
    },
  };
}

export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
