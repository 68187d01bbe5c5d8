/**
 * The pg lock backend (lockdb). The only lock-service layer that knows SQL.
 *
 * Every state change is a conditional statement judged by the database clock (now()), run per
 * item by the group functions of migration 003 (decision 070):
 * - acquire: INSERT .. ON CONFLICT DO UPDATE .. WHERE the current lease is released or expired.
 *   Concurrent acquires serialise on the row lock; the loser re-checks the WHERE against the
 *   winner's row and gets nothing. token = GREATEST(stored token, floor) + 1, so the per-key
 *   counter only grows (a trigger refuses anything else);
 * - renew / release: UPDATE .. WHERE lease_hash matches and the lease is still live.
 * Calls of one kind that arrive while LOCKDB_BATCHES_IN_FLIGHT statements of that kind are in
 * lockdb leave together (natural group commit: one statement, one commit for the group); at low
 * load each leaves at once, alone. Waiting acquires LISTEN for release notifications and sleep
 * until the holder's expiry; each of their attempts is one item of a group.
 * The three statements are named: prepared once per connection, so each call skips parse and plan.
 */
import { isUnavailableError, type Pool } from "../shared/db/pg.js";
import { againAfterDeadlock, groupCommit, orderBy } from "../shared/db/group-commit.js";
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

/** Grants when free; otherwise how long the holder has left (by the database clock). The rule: lock_acquire_batch. */
const ACQUIRE = `
  SELECT ord, token, expires_at, holder_ms FROM lock_acquire_batch($1::text[], $2::bytea[], $3::text[], $4::float8[])`;

const RENEW = `SELECT ord, token, owner, expires_at FROM lock_renew_batch($1::text[], $2::bytea[], $3::float8[])`;

/** Ends a live lease, and in the same statement says whether the id was the key's latest lease. */
const RELEASE = `SELECT ord, released, mine FROM lock_release_batch($1::text[], $2::bytea[])`;

const INSPECT = `
  SELECT token::text AS token, owner, expires_at, (released_at IS NULL AND expires_at > now()) AS held
    FROM locks WHERE key = $1`;

/** Raises the stored floor to at least the configured one; returns the effective floor. */
const RATCHET_FLOOR = `
  UPDATE lock_token_floor SET floor = GREATEST(floor, $1::bigint), updated_at = now()
  RETURNING floor::text AS floor`;

/** The statements that run grouped (a label of the batch-size metric). */
export type GroupedStatement = "acquire" | "renew" | "release";

export interface LockDbBatching {
  /** LOCKDB_BATCH_MAX: most calls in one statement; 1 = every call its own statement and commit. */
  maxBatch: number;
  /** LOCKDB_BATCHES_IN_FLIGHT: statements of one kind in lockdb at once; more calls wait and form the next group. */
  maxInFlight: number;
  /** Told each group's size as it leaves (a metric). */
  onBatch?: (statement: GroupedStatement, size: number) => void;
}

export interface PgBackendOptions {
  pool: Pool;
  listener: PgListener;
  /** LOCK_TOKEN_FLOOR: every token issued exceeds it. */
  floor: bigint;
  batching: LockDbBatching;
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

interface Keyed {
  key: string;
  leaseHash: Buffer;
}
interface AcquireItem extends Keyed {
  owner: string;
  ttlMs: number;
}
interface RenewItem extends Keyed {
  ttlMs: number;
}
interface AcquireRow {
  ord: number;
  token: string | null;
  expires_at: Date | null;
  holder_ms: number | null;
}
interface RenewRow {
  ord: number;
  token: string | null;
  owner: string | null;
  expires_at: Date | null;
}
interface ReleaseRow {
  ord: number;
  released: boolean;
  mine: boolean;
}

/** Creates the backend and ratchets the token floor (lockdb must be reachable). */
export async function createPgBackend(opts: PgBackendOptions): Promise<LockBackend> {
  const { pool, listener, batching } = opts;
  const { rows } = await db(() => pool.query<{ floor: string }>(RATCHET_FLOOR, [opts.floor.toString()]));
  const floor = int8(rows[0]!.floor);

  /**
   * One group, one statement: ordered by key (stable) so that two groups in lockdb at once lock
   * the keys' rows in the same order; each item answered by its own row (`ord`, 1-based).
   */
  function grouped<I extends Keyed, R extends { ord: number }>(
    statement: GroupedStatement,
    text: string,
    values: (ordered: I[]) => unknown[],
  ): (item: I) => Promise<R> {
    async function run(items: I[]): Promise<R[]> {
      const order = orderBy(items, (i) => i.key);
      const ordered = order.map((k) => items[k]!);
      const { rows } = await againAfterDeadlock(() => pool.query<R>({ name: `lock_${statement}_batch`, text, values: values(ordered) }));
      const results = new Array<R>(items.length);
      for (const r of rows) results[order[r.ord - 1]!] = r;
      if (rows.length !== items.length || results.some((r) => r === undefined)) throw new Error(`lock_${statement}_batch left an item unanswered`);
      return results;
    }
    // 1: every call alone, at once, as before group commit (no queue: the pool bounds concurrency).
    if (batching.maxBatch === 1) {
      return async (item) => {
        batching.onBatch?.(statement, 1);
        return (await run([item]))[0]!;
      };
    }
    const call = groupCommit(run, { maxBatch: batching.maxBatch, maxInFlight: batching.maxInFlight, onBatch: (n) => batching.onBatch?.(statement, n) });
    return (item) => call(item);
  }

  const acquireOne = grouped<AcquireItem, AcquireRow>("acquire", ACQUIRE, (items) => [
    items.map((i) => i.key),
    items.map((i) => i.leaseHash),
    items.map((i) => i.owner),
    items.map((i) => i.ttlMs),
  ]);
  const renewOne = grouped<RenewItem, RenewRow>("renew", RENEW, (items) => [items.map((i) => i.key), items.map((i) => i.leaseHash), items.map((i) => i.ttlMs)]);
  const releaseOne = grouped<Keyed, ReleaseRow>("release", RELEASE, (items) => [items.map((i) => i.key), items.map((i) => i.leaseHash)]);

  async function attempt(key: string, owner: string, ttlMs: number): Promise<Attempt<LeaseGrant>> {
    const leaseId = newLeaseId();
    const row = await db(() => acquireOne({ key, leaseHash: leaseHash(leaseId), owner, ttlMs }));
    if (row.token && row.expires_at) return { granted: { key, leaseId, owner, token: int8(row.token), expiresAt: row.expires_at } };
    return { retryInMs: row.holder_ms ?? undefined };
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
      const row = await db(() => renewOne({ key: input.key, leaseHash: leaseHash(input.leaseId), ttlMs: input.ttlMs }));
      if (row.token === null || row.owner === null || row.expires_at === null) return undefined;
      return { key: input.key, leaseId: input.leaseId, owner: row.owner, token: int8(row.token), expiresAt: row.expires_at };
    },

    async release(input: ReleaseInput): Promise<ReleaseOutcome> {
      const row = await db(() => releaseOne({ key: input.key, leaseHash: leaseHash(input.leaseId) }));
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
