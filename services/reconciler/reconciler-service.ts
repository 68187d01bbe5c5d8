/**
 * The reconciler, built from its config: paydb (primary only, migrated) -> the rail-proxy clients
 * -> one run (reconcile.ts). `runOnce` is the Kubernetes CronJob mode; `startLoop` runs every
 * RECONCILE_INTERVAL_MS with /metrics. main.ts only reads the environment and picks the mode.
 */
import type { RunningService } from "../shared/observability/lifecycle.js";
import type { Logger } from "../shared/process/logger.js";
import { createRegistry, serveMetrics } from "../shared/observability/metrics.js";
import { requireMigrated } from "../shared/db/migrate.js";
import { createPool } from "../shared/db/pg.js";
import { createProxyPool } from "../shared/rpc/proxy-pool.js";
import type { ReconcilerConfig } from "./config.js";
import { createReconcilerStore } from "./payout-store.js";
import { createReconciler } from "./reconcile.js";
import { createReconcilerMetrics } from "./reconciler-metrics.js";

export interface ReconcilerService {
  /** One run; a failure is logged once and reported (false), never half-hidden. */
  runOnce(): Promise<boolean>;
  /** Runs every intervalMs until closed, with /metrics. */
  startLoop(): Promise<RunningService>;
  /** Closes the pool (after runOnce, in the CronJob mode). */
  close(): Promise<void>;
}

export async function createReconcilerService(config: ReconcilerConfig, deps: { logger: Logger }): Promise<ReconcilerService> {
  const { logger } = deps;
  const registry = createRegistry("reconciler");
  const pool = createPool({ url: config.paydbUrl, max: 2, primaryOnly: true, applicationName: "reconciler", registry });
  try {
    await requireMigrated(pool, "paydb");
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  const proxies = createProxyPool(config.railProxyUrls, config.transport.tls, { registry, directUnary: config.rpcStack.directClient });
  const metrics = createReconcilerMetrics(registry);
  const store = createReconcilerStore(pool);
  const reconcile = createReconciler({
    proxy: () => proxies.next(),
    store,
    metrics,
    logger,
    settlementWindowMs: config.settlementWindowMs,
    clockSkewAllowanceMs: config.clockSkewAllowanceMs,
    contradictionWatchMs: config.contradictionWatchMs,
    unrecordedWatchMs: config.unrecordedWatchMs,
    dryRun: config.dryRun,
    actor: config.actor,
    callTimeoutMs: config.callTimeoutMs,
  });
  if (config.dryRun) logger.warn({ event: "dry_run" }, "RECONCILER_DRY_RUN: decisions are logged, nothing is changed");

  async function runOnce(): Promise<boolean> {
    try {
      const summary = await reconcile();
      // Liveness (decision 061): only a finished pass that changed what it had to is recorded; a
      // dry run reconciles nothing, so it leaves ReconcilerNotPassing to fire. A pass whose record
      // cannot be written fails, so the CronJob's Job says what the alert will say.
      if (!config.dryRun) await store.recordPass();
      metrics.runs.inc({ result: "ok" });
      logger.info(summary, "reconcile run finished");
      return true;
    } catch (err) {
      metrics.runs.inc({ result: "failed" });
      logger.error({ event: "reconcile_failed", error: err instanceof Error ? err.message : String(err) }, "reconcile run failed");
      return false;
    }
  }

  return {
    runOnce,
    close: () => pool.end(),
    async startLoop() {
      const metricsServer = await serveMetrics(registry, config.host, config.metricsPort);
      let stopping = false;
      let wake = () => {};
      const loop = (async () => {
        while (!stopping) {
          await runOnce();
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, config.intervalMs);
            wake = () => {
              clearTimeout(t);
              resolve();
            };
          });
        }
      })();
      return {
        ready: { port: 0, metricsPort: metricsServer.port, interval_ms: config.intervalMs, dry_run: config.dryRun },
        drainBoundMs: config.drainMs + config.callTimeoutMs + 2000,
        async close() {
          stopping = true;
          wake();
          await loop;
          await new Promise<void>((resolve) => {
            metricsServer.server.close(() => resolve());
            metricsServer.server.closeAllConnections();
          });
          await pool.end();
        },
      };
    },
  };
}
