/**
 * executor composition root: config -> paydb (primary only) -> lock + rail-proxy clients ->
 * claim loop, plus /metrics. A worker, not a server: it has no RPC port (the ready line says
 * port 0), and it is untrusted by design (INV-07): nothing here is a guard.
 */
import { context } from "@opentelemetry/api";
import { onShutdown, runMain } from "../shared/lifecycle.js";
import { contextFromTraceparent, inSpan } from "../shared/tracing.js";
import { createLogger } from "../shared/logger.js";
import { createRegistry, serveMetrics } from "../shared/metrics.js";
import { createPool } from "../shared/pg.js";
import { requireMigrated } from "../shared/migrate.js";
import { createLockClient, createProxyPool } from "./clients.js";
import { readConfig } from "./config.js";
import { createExecutorMetrics } from "./executor-metrics.js";
import { createPayOne } from "./pay-one.js";
import { createPayoutStore } from "./payout-store.js";
import { startWorker } from "./worker.js";

const logger = createLogger("executor");

runMain(logger, async () => {
  const config = readConfig();
  const pool = createPool({ url: config.paydbUrl, max: config.concurrency + 2, primaryOnly: true, applicationName: `executor/${config.executorId}` });
  const store = createPayoutStore(pool);
  // Fail start-up (exit 70) when paydb is unreachable or behind this build, rather than report
  // ready and do nothing.
  await requireMigrated(pool, "paydb");

  const registry = createRegistry("executor");
  const metrics = createExecutorMetrics(registry);
  const payOneUntraced = createPayOne({
    store,
    lock: createLockClient(config.lockUrl, config.transport.tls),
    proxies: createProxyPool(config.railProxyUrls, config.transport.tls),
    metrics,
    logger,
    executorId: config.executorId,
    leaseTtlMs: config.leaseTtlMs,
    lockWaitMs: config.lockWaitMs,
    callTimeoutMs: config.callTimeoutMs,
    pauseAfterFenceMs: config.pauseAfterFenceMs,
    submissionReference: config.submissionReference,
    pollIntervalMs: config.pollIntervalMs,
  });
  // The payout's trace continues here: the executor's span is a CHILD of the CreatePayout span
  // stored on the row (docs/decisions/003-trace-per-payout.md), so one trace covers the payout.
  const payOne: typeof payOneUntraced = (p, signal) =>
    context.with(contextFromTraceparent(p.traceparent), () =>
      inSpan("executor PayPayout", { "railfence.payout_id": p.payoutId, "railfence.account_id": p.accountId, "railfence.executor_id": config.executorId }, async (span) => {
        const outcome = await payOneUntraced(p, signal);
        span.setAttribute("railfence.outcome", outcome);
        return outcome;
      }),
    );
  if (config.pauseAfterFenceMs > 0) {
    logger.warn({ event: "pause_after_fence", pause_ms: config.pauseAfterFenceMs }, "EXECUTOR_PAUSE_AFTER_FENCE_MS is set: test/drill mode");
  }
  const metricsServer = await serveMetrics(registry, config.host, config.metricsPort);
  const worker = startWorker({
    store,
    payOne,
    metrics,
    logger,
    executorId: config.executorId,
    concurrency: config.concurrency,
    pollIntervalMs: config.pollIntervalMs,
    claimMs: config.lockWaitMs + config.callTimeoutMs,
  });
  logger.info({ event: "ready", port: 0, metricsPort: metricsServer.port, executor_id: config.executorId, proxies: config.railProxyUrls.length }, "executor ready");

  // Drain bound, then one call timeout for a submission already on the wire, then slack.
  onShutdown(logger, config.drainMs + 2 * config.callTimeoutMs + 2000, async () => {
    await worker.stop(config.drainMs);
    await new Promise<void>((resolve) => {
      metricsServer.server.close(() => resolve());
      metricsServer.server.closeAllConnections();
    });
    await pool.end();
  });
});
