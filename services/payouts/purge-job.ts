/**
 * Deletes idempotency keys past retention, in small batches so one run never holds many row
 * locks or a long transaction. Correctness does not depend on it (an expired key is treated
 * as new whether or not it was purged); it only keeps the table small.
 */
import type { Logger } from "../shared/process/logger.js";
import type { IdempotencyStore } from "./idempotency-store.js";
import type { LimitStore } from "./limit-store.js";
import type { PayoutsMetrics } from "./payouts-metrics.js";

const BATCH = 1000;
/** Bound per tick, so a huge backlog is worked off over several ticks. */
const MAX_BATCHES_PER_TICK = 50;

/** Starts the periodic purge; returns a stop function that also waits for a running tick. */
export function startPurgeJob(store: IdempotencyStore, metrics: PayoutsMetrics, logger: Logger, intervalMs: number, limits?: LimitStore): () => Promise<void> {
  let running: Promise<void> | undefined;
  let stopped = false;
  const tick = async () => {
    let total = 0;
    try {
      for (let i = 0; i < MAX_BATCHES_PER_TICK && !stopped; i++) {
        const n = await store.purgeExpired(BATCH);
        total += n;
        metrics.purged.inc(n);
        if (n < BATCH) break;
      }
      if (total > 0) logger.debug({ event: "idempotency_purged", count: total }, "expired idempotency keys purged");
      // Money-limit usage of windows long over: one batch a tick is plenty (a few rows per client and account a day).
      if (limits && !stopped) await limits.purgeExpired(BATCH);
    } catch {
      // paydb down: the next tick tries again; nothing depends on a timely purge.
    }
  };
  const timer = setInterval(() => {
    if (running) return;
    running = tick().finally(() => {
      running = undefined;
    });
  }, intervalMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
