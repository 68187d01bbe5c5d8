/**
 * PostgreSQL pools. Timeouts everywhere (a hung database must surface as an error, not a hung
 * payout), and an optional primary-only guard: every new connection is checked with
 * pg_is_in_recovery() before first use, so a pool pointed at a standby refuses to work
 * (ADR-007 failure iii: a stale read of the mark is the same bug with one extra hop).
 */
import pg from "pg";
import type { Registry } from "prom-client";
import { REASONS, unavailable } from "../domain/errors.js";
import { countTransactions, databaseOf } from "./transaction-count.js";

export interface PoolOptions {
  url: string;
  max?: number;
  /** Refuse connections to a server in recovery (a standby). */
  primaryOnly?: boolean;
  statementTimeoutMs?: number;
  /** Bound on waiting for one row lock (PostgreSQL lock_timeout; SQLSTATE 55P03 past it). Unset: none. */
  lockTimeoutMs?: number;
  connectTimeoutMs?: number;
  applicationName?: string;
  /** The process's metrics registry: every transaction the pool ends is counted on it (transaction-count.ts). */
  registry?: Registry;
}

export class StandbyRefusedError extends Error {
  constructor() {
    super("database is a standby (pg_is_in_recovery() = true); refusing to use it");
    this.name = "StandbyRefusedError";
  }
}

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

const checkedClients = new WeakSet<pg.PoolClient>();

export function createPool(opts: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 2000,
    statement_timeout: opts.statementTimeoutMs ?? 5000,
    idle_in_transaction_session_timeout: 10_000,
    idleTimeoutMillis: 30_000,
    application_name: opts.applicationName ?? "railfence",
    // Durable commits whatever the server's default: an intent row acknowledged to the proxy must
    // survive a paydb crash, or a payment it then forwarded would have no intent and could be
    // made again. (Drill paydb-outage found exactly this against synchronous_commit=off.)
    options: `-c synchronous_commit=on${opts.lockTimeoutMs ? ` -c lock_timeout=${Math.floor(opts.lockTimeoutMs)}` : ""}`,
  });
  // An idle client losing its connection must not crash the process; the next query fails.
  pool.on("error", () => {});
  // Nor may a checked-out one (a transaction in flight when the database goes away): its
  // pending query rejects, which is how the caller learns; the event itself needs a listener.
  pool.on("connect", (client) => client.on("error", () => {}));
  if (opts.registry) countTransactions(pool, opts.registry, databaseOf(opts.url));
  if (opts.primaryOnly) {
    const rawConnect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
    const checkedConnect = async (): Promise<pg.PoolClient> => {
      const client = await rawConnect();
      if (!checkedClients.has(client)) {
        try {
          const { rows } = await client.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r");
          if (rows[0]?.r !== false) throw new StandbyRefusedError();
          checkedClients.add(client);
        } catch (err) {
          client.release(true);
          throw err;
        }
      }
      return client;
    };
    // pool.query() calls connect() with a callback, so both styles are supported.
    (pool as unknown as { connect: unknown }).connect = (cb?: (err: unknown, client?: pg.PoolClient, done?: (e?: unknown) => void) => void) => {
      const p = checkedConnect();
      if (!cb) return p;
      p.then(
        (client) => cb(undefined, client, (e?: unknown) => client.release(e as Error | undefined)),
        (err: unknown) => cb(err),
      );
      return undefined;
    };
  }
  return pool;
}

/**
 * SQLSTATE 57014 (statement_timeout, or a cancel) and 55P03 (lock_timeout): the database is up
 * but did not answer in time (load, a long transaction holding a row). The statement was
 * rolled back, so the same request may succeed later: retryable, never `internal`. Kept apart
 * from isUnavailableError, whose callers (the proxy's admission, the executor's outcome write)
 * decide by "unreachable" on the money path.
 */
export function isBusyError(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === "57014" || code === "55P03";
}

/**
 * A group statement (group-commit.ts) refused for what one of its rows is (a trigger, a
 * constraint), not because the database was away, busy or deadlocked: its items are worth
 * running again alone, each to hear its own answer.
 */
export function isRowRefusal(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !isUnavailableError(err) && !isBusyError(err) && code !== "40P01" && code !== "40001";
}

/** SQLSTATE 55P03: a row lock was not granted within lock_timeout (another transaction holds it). */
export function isLockTimeout(err: unknown): boolean {
  return (err as { code?: unknown })?.code === "55P03";
}

/** SQLSTATE classes and codes that mean "the database is not reachable or not usable now". */
export function isUnavailableError(err: unknown): boolean {
  if (err instanceof StandbyRefusedError) return true;
  const e = err as { code?: string; message?: string };
  if (typeof e?.code === "string") {
    if (e.code.startsWith("08")) return true; // connection exception
    if (e.code === "57P01" || e.code === "57P02" || e.code === "57P03") return true; // admin shutdown, crash, cannot connect now
    if (e.code === "53300") return true; // too many connections
    if (e.code === "25006") return true; // read-only transaction (standby)
    if (["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH"].includes(e.code)) return true;
  }
  const msg = typeof e?.message === "string" ? e.message : "";
  return (
    msg.includes("timeout exceeded when trying to connect") ||
    msg.includes("Connection terminated") ||
    msg.includes("connection timeout") ||
    msg.includes("Client has encountered a connection error")
  );
}

/**
 * The refusals of each database a handler reads through dbCall. Only paydb is one today; a
 * database added here needs its own catalogue entries (reasons.ts), never a reason made up
 * from its name.
 */
const DB_REASONS = {
  PAYDB: { notPrimary: REASONS.PAYDB_NOT_PRIMARY, unavailable: REASONS.PAYDB_UNAVAILABLE, busy: REASONS.PAYDB_BUSY },
} as const;
export type HandlerDatabase = keyof typeof DB_REASONS;

/**
 * Turns "this database cannot be used now" into the retryable answer clients see:
 * `<DB>_NOT_PRIMARY` for a standby, `<DB>_UNAVAILABLE` when unreachable (UNAVAILABLE with a
 * retry hint), `<DB>_BUSY` when it did not answer in time (isBusyError). Anything else is
 * rethrown unchanged. `consequence` tells the caller what did
 * not happen ("nothing was forwarded").
 */
export function dbUnavailable(db: HandlerDatabase, err: unknown, consequence = "retry later"): never {
  const name = db.toLowerCase();
  if (err instanceof StandbyRefusedError) throw unavailable(DB_REASONS[db].notPrimary, `${name} is a standby; only a primary is used`, 1000, err);
  if (isUnavailableError(err)) throw unavailable(DB_REASONS[db].unavailable, `${name} is unavailable; ${consequence}`, 1000, err);
  if (isBusyError(err)) throw unavailable(DB_REASONS[db].busy, `${name} did not answer in time; ${consequence}`, 1000, err);
  throw err;
}

/** Runs a database call, mapping unavailability with dbUnavailable. */
export async function dbCall<T>(db: HandlerDatabase, fn: () => Promise<T>, consequence?: string): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    dbUnavailable(db, err, consequence);
  }
}

/**
 * Retries a write while the database is unreachable: up to `tries` attempts, 100 ms doubling
 * between them. Only for writes that are safe to repeat (fenced or conditional, like recording
 * an outcome); any other error, or the last unavailability, is thrown.
 */
export async function retryWhileUnavailable<T>(fn: () => Promise<T>, tries = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= tries || !isUnavailableError(err)) throw err;
      await new Promise((r) => setTimeout(r, 100 * 2 ** (attempt - 1)));
    }
  }
}

/**
 * paydb must fail over only to a synchronous standby: an asynchronous one can lose intents the
 * proxy already acknowledged and forwarded (docs/deploy.md). A primary with no synchronous
 * standby is fine for development and says so at start.
 */
export async function warnIfAsynchronous(pool: pg.Pool, logger: { warn: (obj: object, msg: string) => void }): Promise<void> {
  try {
    const { rows } = await pool.query<{ synchronous_standby_names: string }>("SHOW synchronous_standby_names");
    if (!rows[0]?.synchronous_standby_names) {
      logger.warn(
        { event: "paydb_replication_asynchronous" },
        "paydb has no synchronous standby (synchronous_standby_names is empty): a failover could lose acknowledged intents. Fine for a single-node database; in production fail over only to a synchronous standby",
      );
    }
  } catch {
    // Not worth refusing to start over a diagnostic.
  }
}
