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
import { announceGuards, guardsFrom, inMemoryMark } from "./negative-controls.js";
import { requireMigrated } from "../shared/migrate.js";
import { warnIfAsynchronous } from "../shared/pg.js";

const logger = createLogger("rail-proxy");

runMain(logger, async () => {
  const config = readConfig();
  const pool = createPool({
    url: config.paydbUrl,
    max: config.paydbPoolMax,
    primaryOnly: true,
    statementTimeoutMs: config.admissionTimeoutMs,
    applicationName: `rail-proxy/${config.replicaId}`,
  });
  const store = createSubmissionStore(pool, config.railDeadlineMs + config.ambiguityMarginMs);
  // Refuse to start against a standby (ADR-007 failure iii). Every later connection is checked too.
  if (!(await store.isPrimary())) throw new Error("paydb is a standby (pg_is_in_recovery() = true); rail-proxy only runs against a primary");
  await requireMigrated(pool, "paydb");
  await warnIfAsynchronous(pool, logger);

  const registry = createRegistry("rail-proxy");
  const metrics = createProxyMetrics(registry);
  const guards = guardsFrom(config);
  const stopWarning = announceGuards(config, guards, metrics, logger);

  const rail = createRailClient(config.railUrl, config.railCredential, config.transport.tls);
  const submit = createAdmission({
    store,
    rail,
    metrics,
    logger,
    guards,
    markPrecheck: config.markStore === "memory" ? inMemoryMark() : undefined,
    railDeadlineMs: config.railDeadlineMs,
  });
  const stopSweeper = startSweeper(store, metrics, logger, config.sweepIntervalMs);

  const server = await startServiceServer({
    name: "rail-proxy",
    host: config.host,
    port: config.port,
    metricsPort: config.metricsPort,
    serviceNames: [RailProxyService.typeName],
    routes: proxyRoutes({ tokenKey: config.tokenKey, rail, railDeadlineMs: config.railDeadlineMs, store, submit, metrics, replicaId: config.replicaId, logger }),
    registry,
    logger,
    readMaxBytes: REQUEST_MAX_BYTES["rail-proxy"],
    readTimeoutMs: config.readTimeoutMs,
    tls: config.transport,
    authz: POLICIES.railProxy,
  });
  logger.info(
    { event: "ready", port: server.port, metricsPort: server.metricsPort, replica_id: config.replicaId, fencing_enabled: config.fencingEnabled, forward_budget_ms: guards.forwardBudgetMs ?? null },
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
