/**
 * Commits a test's work makes, counted by the pool that runs it: the same count every railfence
 * pool keeps (services/shared/db/transaction-count.ts: one per transaction PostgreSQL reports
 * ended, which test/observability/db-transactions.test.ts checks against pg_stat_database), read
 * right after the work, with nothing else in the database to tell apart.
 */
import { type Counter, Registry } from "prom-client";
import type pg from "pg";
import { createPool } from "../../services/shared/db/pg.js";
import { DB_TRANSACTIONS_METRIC } from "../../services/shared/db/transaction-count.js";

export interface CountedPool {
  pool: pg.Pool;
  /** Commits `work` made through this pool. */
  commitsOf(work: () => Promise<unknown>): Promise<number>;
  end(): Promise<void>;
}

/** A pool of `max` connections to url, already connected, whose commits are counted. */
export async function countedPool(url: string, max = 1): Promise<CountedPool> {
  const registry = new Registry();
  const pool = createPool({ url, max, registry, applicationName: "test-counted" });
  // Open the connections first: a backend's start-up is a commit of its own.
  const clients = await Promise.all(Array.from({ length: max }, () => pool.connect()));
  for (const c of clients) c.release();
  const commits = async () => {
    const metric = registry.getSingleMetric(DB_TRANSACTIONS_METRIC) as Counter | undefined;
    const values = (await metric?.get())?.values ?? [];
    return values.filter((v) => v.labels.outcome === "commit").reduce((n, v) => n + v.value, 0);
  };
  return {
    pool,
    async commitsOf(work) {
      const before = await commits();
      await work();
      return (await commits()) - before;
    },
    end: () => pool.end(),
  };
}
