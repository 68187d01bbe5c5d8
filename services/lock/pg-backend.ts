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
 * A release waits up to LOCKDB_RELEASE_CARRY_MS to be carried by the next group of acquire
 * attempts (decision 074, migration 004: one statement, one commit for both), and leaves alone
 * when that time is up, at once when an acquire in this process waits for its key, and on close.
 * Its caller hears its answer when it has committed, either way. The lock is advisory: a release
 * that commits later only keeps the key for those few milliseconds longer, as a slow one would.
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
import { releaseCarry } from "./release-carry.js";
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

/** Releases carried by a group of acquire attempts, in key order (migration 004). */
const STEPS = `
  SELECT ord, token, expires_at, holder_ms, released, mine
    FROM lock_step_batch($1::text[], $2::text[], $3::bytea[], $4::text[], $5::float8[])`;

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
  /**
   * LOCKDB_RELEASE_CARRY_MS: how long a release may wait for a group of acquire attempts to carry
   * it into lockdb (its commit shared with theirs). 0 or absent: every release leaves at once.
   */
  releaseCarryMs?: number;
  /** Told how each release committed: carried by acquire attempts, or alone (a metric). */
  onRelease?: (committed: "carried" | "alone") => void;
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
/** An item of a step group: a release, or an acquire attempt (migration 004). */
type Step = ({ kind: "release" } & Keyed) | ({ kind: "acquire" } & AcquireItem);
interface StepRow extends AcquireRow {
  released: boolean | null;
  mine: boolean | null;
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
  function statementOf<I extends Keyed, R extends { ord: number }>(name: string, text: string, values: (ordered: I[]) => unknown[]) {
    return async (items: I[]): Promise<R[]> => {
      const order = orderBy(items, (i) => i.key);
      const ordered = order.map((k) => items[k]!);
      const { rows } = await againAfterDeadlock(() => pool.query<R>({ name, text, values: values(ordered) }));
      const results = new Array<R>(items.length);
      for (const r of rows) results[order[r.ord - 1]!] = r;
      if (rows.length !== items.length || results.some((r) => r === undefined)) throw new Error(`${name} left an item unanswered`);
      return results;
    };
  }

  /** Calls of one kind queued into groups (group commit), or each alone at once (LOCKDB_BATCH_MAX=1). */
  function grouped<I, R>(statement: GroupedStatement, run: (items: I[]) => Promise<R[]>): (item: I) => Promise<R> {
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

  const acquireStatement = statementOf<AcquireItem, AcquireRow>("lock_acquire_batch", ACQUIRE, (items) => [
    items.map((i) => i.key),
    items.map((i) => i.leaseHash),
    items.map((i) => i.owner),
    items.map((i) => i.ttlMs),
  ]);
  const releaseStatement = statementOf<Keyed, ReleaseRow>("lock_release_batch", RELEASE, (items) => [items.map((i) => i.key), items.map((i) => i.leaseHash)]);
  // Releases first: the stable key order then runs a key's release before its acquires.
  const stepStatement = statementOf<Step, StepRow>("lock_step_batch", STEPS, (items) => [
    items.map((i) => i.kind),
    items.map((i) => i.key),
    items.map((i) => i.leaseHash),
    items.map((i) => (i.kind === "acquire" ? i.owner : null)),
    items.map((i) => (i.kind === "acquire" ? i.ttlMs : null)),
  ]);

  // Without carrying: every release leaves at once, grouped only with releases (decision 070).
  const releaseOne = grouped("release", releaseStatement);
  const carryMs = batching.releaseCarryMs ?? 0;
  const releases = releaseCarry<Keyed, ReleaseRow>(carryMs, async (items) => {
    batching.onBatch?.("release", items.length);
    const rows = await releaseStatement(items);
    for (const _ of rows) batching.onRelease?.("alone");
    return rows;
  });

  /** A group of acquire attempts, carrying every release waiting for one (decision 074). */
  async function acquireCarrying(items: AcquireItem[]): Promise<AcquireRow[]> {
    const carried = releases.take();
    if (carried.length === 0) return acquireStatement(items);
    let rows: StepRow[];
    try {
      rows = await stepStatement([...carried.map((c): Step => ({ kind: "release", ...c.item })), ...items.map((i): Step => ({ kind: "acquire", ...i }))]);
    } catch (err) {
      for (const c of carried) c.reject(err);
      throw err;
    }
    for (const [i, c] of carried.entries()) {
      batching.onRelease?.("carried");
      c.resolve({ ord: rows[i]!.ord, released: rows[i]!.released === true, mine: rows[i]!.mine === true });
    }
    return rows.slice(carried.length);
  }

  const acquireOne = grouped("acquire", acquireCarrying);
  const renewOne = grouped(
    "renew",
    statementOf<RenewItem, RenewRow>("lock_renew_batch", RENEW, (items) => [items.map((i) => i.key), items.map((i) => i.leaseHash), items.map((i) => i.ttlMs)]),
  );
  // Acquires in this process waiting for a key: a release of it does not wait to be carried.
  const waitedFor = new Map<string, number>();

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
      waitedFor.set(key, (waitedFor.get(key) ?? 0) + 1);
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
        const left = (waitedFor.get(key) ?? 1) - 1;
        if (left > 0) waitedFor.set(key, left);
        else waitedFor.delete(key);
      }
    },

    async renew(input: RenewInput): Promise<LeaseGrant | undefined> {
      const row = await db(() => renewOne({ key: input.key, leaseHash: leaseHash(input.leaseId), ttlMs: input.ttlMs }));
      if (row.token === null || row.owner === null || row.expires_at === null) return undefined;
      return { key: input.key, leaseId: input.leaseId, owner: row.owner, token: int8(row.token), expiresAt: row.expires_at };
    },

    async release(input: ReleaseInput): Promise<ReleaseOutcome> {
      const item = { key: input.key, leaseHash: leaseHash(input.leaseId) };
      const answer = carryMs > 0 ? releases.add(item) : releaseOne(item);
      if (waitedFor.has(input.key)) releases.leaveNow();
      const row = await db(() => answer);
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
      await releases.drain();
      await listener.close();
      await pool.end();
    },
  };
}
