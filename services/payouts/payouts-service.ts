/**
 * The payouts API, built from its config: paydb (primary only) -> stores -> domain -> server.
 * main.ts only reads the environment and wires signals.
 */
import type { RunningService } from "../shared/observability/lifecycle.js";
import type { Logger } from "../shared/process/logger.js";
import { createRegistry } from "../shared/observability/metrics.js";
import { createPool } from "../shared/db/pg.js";
import { startServiceServer } from "../shared/edge/server.js";
import { REQUEST_MAX_BYTES } from "../shared/domain/limits.js";
import { PayoutService } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
import { POLICIES } from "../shared/edge/authz.js";
import { registerBacklogMetrics } from "./backlog-metrics.js";
import { createBacklogStore } from "./backlog-store.js";
import { createCallerIdentity } from "./caller-identity.js";
import type { PayoutsConfig } from "./config.js";
import { createPayoutCreator } from "./create-payout.js";
import { createPayoutStatement } from "./create-payout-statement.js";
import { createIdempotencyStore } from "./idempotency-store.js";
import { createLimitStore } from "./limit-store.js";
import { payoutRoutes } from "./payout-handlers.js";
import { createPayoutStore } from "./payout-store.js";
import { createPayoutsMetrics } from "./payouts-metrics.js";
import { startPurgeJob } from "./purge-job.js";

/**
 * How long one paydb read of the backlog serves /metrics (decision 060): scrapes never cost paydb
 * more than one query per replica per interval, and an age is at most this stale.
 */
const BACKLOG_MIN_INTERVAL_MS = 5000;

/** The longest a consumption may take: its own work, plus a bounded wait for each counter row. */
function limitsCallBoundMs(config: PayoutsConfig): number {
  return config.limitsTimeoutMs + 2 * config.limitsLockWaitMs;
}

export async function startPayouts(config: PayoutsConfig, deps: { logger: Logger }): Promise<RunningService> {
  const { logger } = deps;
  const registry = createRegistry("payouts");
  const pool = createPool({
    registry,
    url: config.paydbUrl,
    max: config.paydbPoolMax,
    primaryOnly: true,
    applicationName: "payouts",
    statementTimeoutMs: config.paydbStatementTimeoutMs,
  });
  const payouts = createPayoutStore(pool);
  const keys = createIdempotencyStore(pool);
  await payouts.checkReady();
  // Limits in paydb (the default): CreatePayout is one statement, one commit (decision 071).
  // A limit store of its own cannot share paydb's transaction: the stepwise path then.
  const statement = config.limitsInPaydb ? createPayoutStatement(pool) : null;
  await statement?.checkReady().catch(async (err: unknown) => {
    await pool.end().catch(() => {});
    throw err;
  });
  // The money-limit store has its own pool with short timeouts: a slow store refuses money
  // movement quickly (fail closed) and never starves the reads of connections. A consumption
  // may wait for each of its two counter rows (lock_timeout each) on top of its own work.
  const limitsBoundMs = limitsCallBoundMs(config);
  const limitsPool = createPool({
    registry,
    url: config.limitsDbUrl,
    max: config.limitsPoolMax,
    primaryOnly: true,
    applicationName: "payouts-limits",
    connectTimeoutMs: config.limitsTimeoutMs,
    statementTimeoutMs: limitsBoundMs,
    lockTimeoutMs: config.limitsLockWaitMs,
  });
  const limitStore = createLimitStore(limitsPool);
  // Fail at start, not on every create: an unmigrated (or unreachable) limit store would refuse
  // all money movement while reads and health looked fine.
  await limitStore.checkReady().catch(async (err: unknown) => {
    await Promise.all([pool.end(), limitsPool.end()]).catch(() => {});
    throw err;
  });

  const metrics = createPayoutsMetrics(registry);
  registerBacklogMetrics(registry, { store: createBacklogStore(pool), logger, minIntervalMs: BACKLOG_MIN_INTERVAL_MS });
  const createPayout = createPayoutCreator({
    payouts,
    keys,
    limitStore,
    statement,
    limits: config.limits,
    // A little past the statement timeout, so paydb's own (more precise) error arrives first.
    limitsTimeoutMs: limitsBoundMs + 250,
    limitsLockWaitMs: config.limitsLockWaitMs,
    metrics,
    logger,
    lockMs: config.lockMs,
    retentionMs: config.retentionMs,
  });
  const stopPurge = startPurgeJob(keys, metrics, logger, config.purgeIntervalMs, limitStore);

  const server = await startServiceServer({
    name: "payouts",
    host: config.host,
    port: config.port,
    directUnary: config.rpcStack.directServer,
    metricsPort: config.metricsPort,
    serviceNames: [PayoutService.typeName],
    routes: payoutRoutes({ createPayout, payouts, callerIdentity: createCallerIdentity(config.defaultClientId), keyRetentionMs: config.retentionMs }),
    registry,
    logger,
    readMaxBytes: REQUEST_MAX_BYTES.payouts,
    readTimeoutMs: config.readTimeoutMs,
    tls: config.transport,
    authz: POLICIES.payouts(config.clientIdentities),
  });
  return {
    ready: { port: server.port, metricsPort: server.metricsPort },
    drainBoundMs: config.drainMs + 2000,
    async close() {
      await stopPurge();
      // In-flight creates finish (payout + pinned answer commit, or roll back) before the pools close.
      await server.close(config.drainMs);
      await pool.end();
      await limitsPool.end();
    },
  };
}
