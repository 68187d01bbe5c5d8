/**
 * The reconciler's process. RECONCILE_INTERVAL_MS=0: one run, a summary line, exit 0 (the
 * Kubernetes CronJob mode; a failed run exits 70 so the Job is marked failed). > 0: a loop with a
 * ready line and /metrics, drained on SIGTERM.
 */
import { EXIT_OK, EXIT_STARTUP, flushTelemetry, onShutdown, runMain } from "../shared/observability/lifecycle.js";
import { createLogger } from "../shared/process/logger.js";
import { readConfig } from "./config.js";
import { createReconcilerService } from "./reconciler-service.js";

const logger = createLogger("reconciler");

runMain(logger, async () => {
  const config = readConfig();
  const service = await createReconcilerService(config, { logger });
  if (config.intervalMs === 0) {
    const ok = await service.runOnce();
    await service.close();
    await flushTelemetry();
    process.exit(ok ? EXIT_OK : EXIT_STARTUP);
  }
  const loop = await service.startLoop();
  logger.info({ event: "ready", ...loop.ready }, "ready");
  onShutdown(logger, loop.drainBoundMs, () => loop.close());
});
