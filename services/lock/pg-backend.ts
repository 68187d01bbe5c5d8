/**
 * The pg lock backend (lockdb). The only lock-service layer that knows SQL.
 *
 * Every state change is ONE conditional statement judged by the database clock (now()):
 * - acquire: INSERT .. ON CONFLICT DO UPDATE .. WHERE the current lease is released or expired.
 *   Concurrent acquires serialise on the row lock; the loser re-checks the WHERE against the
 *   winner's row and gets nothing. token = GREATEST(stored token, floor) + 1, so the per-key
 *   counter only grows (a trigger refuses anything else);
 * - renew / release: UPDATE .. WHERE lease_hash matches and the lease is still live.
 * Waiting acquires LISTEN for release notifications and sleep until the holder's expiry.
 * acquire, renew and release are named statements: prepared once per connection, so each call
 * skips parse and plan (every payout runs them).
 */
import { isUnavailableError, type Pool } from "../shared/db/pg.js";
import { leaseHash, newLeaseId } from "./lease-id.js";
import {
  BackendUnavailableError,
  type AcquireInput,
  type LeaseGrant,
  type LockBackend,
  type LockState,
  type ReleaseInput,
  type ReleaseOutcome,
  type RenewInput,
} from "./lock-backend.js";
import type { PgListener } from "../shared/db/pg-listener.js";
import { attemptUntil, Wakeup, type Attempt } from "./waiting.js";
import { int8 } from "../shared/domain/int8.js";

export const RELEASE_CHANNEL = "railfence_lock_released";

const FLOOR = "(SELECT floor FROM lock_token_floor)";

/** Grants when free; otherwise returns how long the holder has left (by the database clock). */
// [rule:lock-acquire]
const ACQUIRE = `
  WITH granted AS (
    INSERT INTO locks AS l (key, token, lease_hash, owner, granted_at, expires_at)
    VALUES ($1, ${FLOOR} + 1, $2, $3, now(), now() + make_interval(secs => $4::float8 / 1000))
    ON CONFLICT (key) DO UPDATE
       SET token = GREATEST(l.token, ${FLOOR}) + 1,
           lease_hash = EXCLUDED.lease_hash, owner = EXCLUDED.owner,
           granted_at = EXCLUDED.granted_at, expires_at = EXCLUDED.expires_at, released_at = NULL
     WHERE l.released_at IS NOT NULL OR l.expires_at <= now()
    RETURNING token, expires_at)
  SELECT token::text AS token, expires_at, NULL::float8 AS holder_ms FROM granted
  UNION ALL
  SELECT NULL, NULL, GREATEST(0, EXTRACT(EPOCH FROM (expires_at - now())) * 1000)::float8
    FROM locks WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM granted)`;
// [/rule:lock-acquire]

const RENEW = `
  UPDATE locks SET expires_at = now() + make_interval(secs => $3::float8 / 1000)
   WHERE key = $1 AND lease_hash = $2 AND released_at IS NULL AND expires_at > now()
  RETURNING token::text AS token, owner, expires_at`;

/** Ends a live lease, and in the same statement says whether the id was the key's latest lease. */
const RELEASE = `
  WITH latest AS (SELECT lease_hash = $2 AS mine FROM locks WHERE key = $1),
  ended AS (
    UPDATE locks SET released_at = now()
     WHERE key = $1 AND lease_hash = $2 AND released_at IS NULL AND expires_at > now()
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM ended) AS released, COALESCE((SELECT mine FROM latest), false) AS mine`;

const INSPECT = `
  SELECT token::text AS token, owner, expires_at, (released_at IS NULL AND expires_at > now()) AS held
    FROM locks WHERE key = $1`;

/** Raises the stored floor to at least the configured one; returns the effective floor. */
const RATCHET_FLOOR = `
  UPDATE lock_token_floor SET floor = GREATEST(floor, $1::bigint), updated_at = now()
  RETURNING floor::text AS floor`;

export interface PgBackendOptions {
  pool: Pool;
  listener: PgListener;
  /** LOCK_TOKEN_FLOOR: every token issued exceeds it. */
  floor: bigint;
  maxSleepMs?: number;
}

/** Runs a lockdb call, turning "lockdb unreachable" into BackendUnavailableError. */
async function db<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUnavailableError(err) || (err as { code?: string }).code === "57014") {
      // 57014 = statement timeout: a hung database is an unavailable one.
      throw new BackendUnavailableError("lockdb is unavailable", { cause: err });
    }
    throw err;
  }
}

/** Creates the backend and ratchets the token floor (lockdb must be reachable). */
export async function createPgBackend(opts: PgBackendOptions): Promise<LockBackend> {
  const { pool, listener } = opts;
  const { rows } = await db(() => pool.query<{ floor: string }>(RATCHET_FLOOR, [opts.floor.toString()]));
  const floor = int8(rows[0]!.floor);

  async function attempt(key: string, owner: string, ttlMs: number): Promise<Attempt<LeaseGrant>> {
    const leaseId = newLeaseId();
    const res = await db(() =>
      pool.query<{ token: string | null; expires_at: Date | null; holder_ms: number | null }>({
        name: "lock_acquire",
        text: ACQUIRE,
        values: [key, leaseHash(leaseId), owner, ttlMs],
      }),
    );
    const row = res.rows[0];
    if (row?.token && row.expires_at) return { granted: { key, leaseId, owner, token: int8(row.token), expiresAt: row.expires_at } };
    return { retryInMs: row?.holder_ms ?? undefined };
  }

  return {
    name: "pg",
    floor,

    async acquire(input: AcquireInput): Promise<LeaseGrant | undefined> {
      const { key, owner, ttlMs } = input;
      if (input.waitMs === 0) {
        const r = await attempt(key, owner, ttlMs);
        return r.granted;
      }
      const wakeup = new Wakeup();
      // Subscribe before the first attempt: a release between attempt and sleep is not lost.
      const unsubscribe = listener.subscribe(key, () => wakeup.kick());
      try {
        return await attemptUntil({
          waitMs: input.waitMs,
          signal: input.signal,
          wakeup,
          attempt: () => attempt(key, owner, ttlMs),
          maxSleepMs: opts.maxSleepMs,
        });
      } finally {
        unsubscribe();
      }
    },

    async renew(input: RenewInput): Promise<LeaseGrant | undefined> {
      const { rows } = await db(() =>
        pool.query<{ token: string; owner: string; expires_at: Date }>({
          name: "lock_renew",
          text: RENEW,
          values: [input.key, leaseHash(input.leaseId), input.ttlMs],
        }),
      );
      const row = rows[0];
      if (!row) return undefined;
      return { key: input.key, leaseId: input.leaseId, owner: row.owner, token: int8(row.token), expiresAt: row.expires_at };
    },

    async release(input: ReleaseInput): Promise<ReleaseOutcome> {
      const { rows } = await db(() =>
        pool.query<{ released: boolean; mine: boolean }>({ name: "lock_release", text: RELEASE, values: [input.key, leaseHash(input.leaseId)] }),
      );
      const row = rows[0]!;
      if (row.released) return "released";
      return row.mine ? "already_ended" : "not_held";
    },

    async inspect(key: string): Promise<LockState> {
      const { rows } = await db(() => pool.query<{ token: string; owner: string; expires_at: Date; held: boolean }>(INSPECT, [key]));
      const row = rows[0];
      if (!row) return { key, held: false, owner: "", token: 0n, expiresAt: undefined, lastToken: 0n };
      const token = int8(row.token);
      return row.held
        ? { key, held: true, owner: row.owner, token, expiresAt: row.expires_at, lastToken: token }
        : { key, held: false, owner: "", token: 0n, expiresAt: undefined, lastToken: token };
    },

    async close(): Promise<void> {
      await listener.close();
      await pool.end();
    },
  };
}
