/**
 * paydb's durability, declared rather than guessed (PAYDB_DURABILITY). Every guard of the fence
 * lives in paydb: a failover to a standby that had not received the last commits forgets marks
 * and intents, and an honest executor may then pay a payout twice (decision 024).
 *
 * - single-node: one PostgreSQL with its own durable storage (`npm start`, the drills). A crash
 *   loses nothing committed; a restore from backup can (docs/deploy.md).
 * - managed-ha: a managed offering whose failover does not lose acknowledged commits (Cloud SQL
 *   HA's regional disk, RDS Multi-AZ instance; not a read-replica promotion). Not verifiable from
 *   inside the database: the operator vouches for it (docs/deploy.md says what to check).
 * - synchronous-standby: PostgreSQL streaming replication with a synchronous standby. Verified at
 *   start and every interval: `synchronous_standby_names` is set and pg_stat_replication shows a
 *   standby in sync_state sync or quorum (the login needs pg_monitor or pg_read_all_stats to see
 *   it). While it does not, every admission is refused (`unavailable PAYDB_NOT_DURABLE`, counted,
 *   gauged and alerted): nothing is admitted that a failover could forget.
 */
import type pg from "pg";
import { DomainError } from "../shared/domain/errors.js";
import type { Logger } from "../shared/process/logger.js";
import { REASONS } from "../shared/domain/reasons.js";
import type { ProxyMetrics } from "./proxy-metrics.js";

export const DURABILITY_DECLARATIONS = ["single-node", "managed-ha", "synchronous-standby"] as const;
export type Durability = (typeof DURABILITY_DECLARATIONS)[number];

export interface DurabilityWatch {
  /** The refusal for an admission now, or undefined when paydb is as durable as declared. */
  refusal(): DomainError | undefined;
  stop(): void;
}

/** What paydb shows of its synchronous replication: undefined when a synchronous standby is attached. */
export async function synchronousStandbyMissing(pool: Pick<pg.Pool, "query">): Promise<string | undefined> {
  const names = (await pool.query<{ synchronous_standby_names: string }>("SHOW synchronous_standby_names")).rows[0]?.synchronous_standby_names ?? "";
  if (!names.trim()) return "synchronous_standby_names is empty: commits are acknowledged before any standby has them";
  const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')");
  if ((rows[0]?.n ?? 0) === 0) {
    return `no standby is attached in sync_state sync or quorum (synchronous_standby_names = '${names}'; the login needs pg_monitor to see pg_stat_replication)`;
  }
  return undefined;
}

export async function watchDurability(
  pool: Pick<pg.Pool, "query">,
  declared: Durability,
  metrics: ProxyMetrics,
  logger: Logger,
  intervalMs: number,
): Promise<DurabilityWatch> {
  metrics.paydbDurability.set({ declared }, 1);
  if (declared !== "synchronous-standby") {
    logger.info({ event: "paydb_durability", declared }, `paydb durability declared ${declared}`);
    metrics.paydbDurable.set(1);
    return { refusal: () => undefined, stop: () => {} };
  }
  let missing: string | undefined = "not checked yet";
  const check = async () => {
    let now: string | undefined;
    try {
      now = await synchronousStandbyMissing(pool);
    } catch (err) {
      now = `could not check: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (now !== missing) {
      if (now) logger.error({ event: "paydb_not_durable", declared, detail: now }, "paydb is not as durable as declared: admissions are refused");
      else logger.info({ event: "paydb_durable", declared }, "a synchronous standby is attached: admissions are accepted");
    }
    missing = now;
    metrics.paydbDurable.set(missing ? 0 : 1);
  };
  await check();
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void check().finally(() => {
      running = false;
    });
  }, intervalMs);
  timer.unref();
  return {
    refusal: () => {
      if (!missing) return undefined;
      metrics.notDurableRefusals.inc();
      return new DomainError(
        REASONS.PAYDB_NOT_DURABLE,
        `paydb is declared synchronous-standby but ${missing}; nothing was admitted or forwarded`,
        {},
        intervalMs,
      );
    },
    stop: () => clearInterval(timer),
  };
}
