/** rail-proxy composition root: config -> paydb (primary only) -> rail client -> server. */
import { onShutdown, runMain } from "../shared/lifecycle.js";
import { createLogger } from "../shared/logger.js";
import { createRegistry } from "../shared/metrics.js";
import { createPool } from "../shared/pg.js";
import { startServiceServer } from "../shared/server.js";
import { REQUEST_MAX_BYTES } from "../shared/limits.js";
import { RailProxyService } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { createAdmission } from "./admission.js";
import { readConfig } from "./config.js";
import { proxyRoutes } from "./proxy-handlers.js";
import { createProxyMetrics } from "./proxy-metrics.js";
import { POLICIES } from "../shared/authz.js";
import { createRailClient } from "./rail-client.js";
import { createSubmissionStore } from "./submission-store.js";
import { startSweeper } from "./sweeper.js";

const logger = createLogger("rail-proxy");

runMain(logger, async () => {
  const config = readConfig();
  const pool = createPool({ url: config.paydbUrl, max: config.paydbPoolMax, primaryOnly: true, applicationName: `rail-proxy/${config.replicaId}` });
  const store = createSubmissionStore(pool, config.railDeadlineMs + config.ambiguityMarginMs);
  // Refuse to start against a standby (ADR-007 failure iii). Every later connection is checked too.
  if (!(await store.isPrimary())) throw new Error("paydb is a standby (pg_is_in_recovery() = true); rail-proxy only runs against a primary");

  const registry = createRegistry("rail-proxy");
  const metrics = createProxyMetrics(registry);
  const durableFence = config.fencingEnabled && config.markStore === "paydb";
  metrics.fencingEnabled.set(durableFence ? 1 : 0);
  let stopWarning = () => {};
  if (!durableFence) {
    const warn = () =>
      logger.warn(
        { event: "fencing_disabled", mark_store: config.markStore, fencing_enabled: config.fencingEnabled },
        config.markStore === "memory"
          ? "RAIL_PROXY_MARK_STORE=memory: marks live in this process only (ADR-007's rejected design). Restarts and other replicas WILL admit stale tokens. Harness negative controls only."
          : "RAIL_PROXY_FENCING_ENABLED=false: high-water fencing is OFF. Stale executors WILL pay twice. Harness scenario C5 §5.2 only.",
      );
    warn();
    const t = setInterval(warn, 60_000);
    t.unref();
    stopWarning = () => clearInterval(t);
  }

  const rail = createRailClient(config.railUrl, config.railCredential, config.transport.tls);
  const submit = createAdmission({ store, rail, metrics, logger, fencingEnabled: config.fencingEnabled, markStore: config.markStore, railDeadlineMs: config.railDeadlineMs });
  const stopSweeper = startSweeper(store, metrics, logger, config.sweepIntervalMs);

  const server = await startServiceServer({
    name: "rail-proxy",
    host: config.host,
    port: config.port,
    metricsPort: config.metricsPort,
    serviceNames: [RailProxyService.typeName],
    routes: proxyRoutes({ tokenKey: config.tokenKey, rail, railDeadlineMs: config.railDeadlineMs, store, submit, metrics, replicaId: config.replicaId }),
    registry,
    logger,
    readMaxBytes: REQUEST_MAX_BYTES["rail-proxy"],
    readTimeoutMs: config.readTimeoutMs,
    tls: config.transport,
    authz: POLICIES.railProxy,
  });
  logger.info(
    { event: "ready", port: server.port, metricsPort: server.metricsPort, replica_id: config.replicaId, fencing_enabled: config.fencingEnabled },
    "rail-proxy ready",
  );

  onShutdown(logger, config.drainMs + config.railDeadlineMs + 2000, async () => {
    stopSweeper();
    stopWarning();
    // In-flight submissions finish (rail answer recorded) before the pool closes.
    await server.close(config.drainMs + config.railDeadlineMs);
    await pool.end();
  });
});
