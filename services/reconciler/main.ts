/**
 * reconciler composition root. RECONCILE_INTERVAL_MS=0: one run, a summary line, exit 0 (the
 * Kubernetes CronJob mode; a failed run exits 70 so the Job is marked failed). > 0: a loop
 * with a ready line and /metrics, drained on SIGTERM.
 */
import { EXIT_OK, EXIT_STARTUP, flushTelemetry, onShutdown, runMain } from "../shared/lifecycle.js";
import { createLogger } from "../shared/logger.js";
import { createRegistry, serveMetrics } from "../shared/metrics.js";
import { createPool } from "../shared/pg.js";
import { readConfig } from "./config.js";
import { createReconcilerStore } from "./payout-store.js";
import { createProxyRoundRobin } from "./proxy-clients.js";
import { createReconciler } from "./reconcile.js";
import { createReconcilerMetrics } from "./reconciler-metrics.js";

const logger = createLogger("reconciler");

runMain(logger, async () => {
  const config = readConfig();
  const pool = createPool({ url: config.paydbUrl, max: 2, primaryOnly: true, applicationName: "reconciler" });
  const registry = createRegistry("reconciler");
  const metrics = createReconcilerMetrics(registry);
  const runOnce = createReconciler({
    proxy: createProxyRoundRobin(config.railProxyUrls, config.transport.tls),
    store: createReconcilerStore(pool),
    metrics,
    logger,
    settlementWindowMs: config.settlementWindowMs,
    dryRun: config.dryRun,
    actor: config.actor,
    callTimeoutMs: config.callTimeoutMs,
  });
  if (config.dryRun) logger.warn({ event: "dry_run" }, "RECONCILER_DRY_RUN: decisions are logged, nothing is changed");

  /** One run; a failure is logged once and reported, never half-hidden. */
  const run = async (): Promise<boolean> => {
    try {
      const summary = await runOnce();
      metrics.runs.inc({ result: "ok" });
      logger.info(summary, "reconcile run finished");
      return true;
    } catch (err) {
      metrics.runs.inc({ result: "failed" });
      logger.error({ event: "reconcile_failed", error: err instanceof Error ? err.message : String(err) }, "reconcile run failed");
      return false;
    }
  };

  if (config.intervalMs === 0) {
    const ok = await run();
    await pool.end();
    await flushTelemetry();
    process.exit(ok ? EXIT_OK : EXIT_STARTUP);
  }

  const metricsServer = await serveMetrics(registry, config.host, config.metricsPort);
  let stopping = false;
  let wake = () => {};
  const loop = (async () => {
    while (!stopping) {
      await run();
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, config.intervalMs);
        wake = () => (clearTimeout(t), resolve());
      });
    }
  })();
  logger.info({ event: "ready", port: 0, metricsPort: metricsServer.port, interval_ms: config.intervalMs, dry_run: config.dryRun }, "reconciler ready");

  onShutdown(logger, config.drainMs + config.callTimeoutMs + 2000, async () => {
    stopping = true;
    wake();
    await loop;
    await new Promise<void>((resolve) => {
      metricsServer.server.close(() => resolve());
      metricsServer.server.closeAllConnections();
    });
    await pool.end();
  });
});
