/**
 * rail-proxy, built from its config: paydb (primary only, migrated) -> the ledger -> the rail
 * client -> admission (the fence, admission.ts) -> the sweeper -> the RPC server. Dependencies a
 * test wants to replace (the rail client, a guard removed by a negative control) come in through
 * `deps`; main.ts only reads the environment and wires signals, and no setting removes a guard.
 */
import type { Logger } from "../shared/process/logger.js";
import type { RunningService } from "../shared/observability/lifecycle.js";
import { REQUEST_MAX_BYTES } from "../shared/domain/limits.js";
import { createRegistry } from "../shared/observability/metrics.js";
import { requireMigrated } from "../shared/db/migrate.js";
import { createPool, warnIfAsynchronous } from "../shared/db/pg.js";
import { POLICIES } from "../shared/edge/authz.js";
import { startServiceServer } from "../shared/edge/server.js";
import { RailProxyService } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { createAdmission } from "./admission.js";
import type { RailProxyConfig } from "./config.js";
import { announceGuards, productionGuards, type RailProxyControls } from "./guards.js";
import { proxyRoutes } from "./proxy-handlers.js";
import { createProxyMetrics } from "./proxy-metrics.js";
import { createRailClient, railConnectionTiming, type RailClient } from "./rail-client.js";
import { watchDurability } from "./paydb-durability.js";
import { createSubmissionStore } from "./submission-store.js";
import { startSweeper } from "./sweeper.js";

export interface RailProxyDeps {
  logger: Logger;
  /** The one rail client (ADR-007 D1); built from the config unless a test passes its own. */
  rail?: RailClient;
  /** A harness negative control or planted stall (guards.ts); production passes none. */
  controls?: RailProxyControls;
}

export async function startRailProxy(config: RailProxyConfig, deps: RailProxyDeps): Promise<RunningService> {
  const { logger, controls } = deps;
  const registry = createRegistry("rail-proxy");
  const pool = createPool({
    registry,
    url: config.paydbUrl,
    max: config.paydbPoolMax,
    // [rule:d6-primary-only]
    primaryOnly: true,
    statementTimeoutMs: config.admissionTimeoutMs,
    applicationName: `rail-proxy/${config.replicaId}`,
  });
  try {
    const metrics = createProxyMetrics(registry);
    const store = createSubmissionStore(
      pool,
      config.railDeadlineMs + config.ambiguityMarginMs,
      controls?.admission,
      {
        maxBatch: config.admissionBatchMax,
        maxInFlight: config.admissionBatchesInFlight,
        onAdmissionBatch: (size) => metrics.admissionBatchSize.observe(size),
        onOutcomeBatch: (size) => metrics.outcomeBatchSize.observe(size),
      },
      controls?.closesAcceptedPayouts ?? true,
    );
    // The pool refuses a standby on every connection (ADR-007 failure iii): the first query fails
    // start-up against one, as it would fail any admission later.
    await requireMigrated(pool, "paydb");
    await warnIfAsynchronous(pool, logger);
    const guards = controls?.guards ? controls.guards(productionGuards(config)) : productionGuards(config);
    const stopWarning = announceGuards(guards, store.statementGuards, controls?.planted ?? [], metrics, logger);
    const rail =
      deps.rail ??
      createRailClient(
        config.railUrl,
        config.railCredential,
        config.transport.tls,
        // The registry rides with the timing: every rail call is counted (rpc-metrics.ts).
        {
          ...(guards.connectedSession ? railConnectionTiming(config.railDeadlineMs, guards.forwardBudgetMs) : { unguardedSend: true }),
          registry,
          directUnary: config.rpcStack.directClient,
        },
      );
    const submit = createAdmission({
      store,
      rail,
      metrics,
      logger,
      guards,
      markPrecheck: controls?.markPrecheck,
      railDeadlineMs: config.railDeadlineMs,
      holdAfterBudgetCheck: controls?.holdAfterBudgetCheck,
      holdBeforeSendGate: controls?.holdBeforeSendGate,
      now: controls?.now,
    });
    const stopSweeper = startSweeper(store, metrics, logger, config.sweepIntervalMs);
    // Nothing is admitted that a failover could forget (decision 024).
    const durability = await watchDurability(pool, config.paydbDurability, metrics, logger, config.paydbDurabilityCheckMs);
    const durableSubmit: typeof submit = (intent) => {
      const refusal = durability.refusal();
      if (refusal) throw refusal;
      return submit(intent);
    };

    const server = await startServiceServer({
      name: "rail-proxy",
      host: config.host,
      port: config.port,
      directUnary: config.rpcStack.directServer,
      metricsPort: config.metricsPort,
      serviceNames: [RailProxyService.typeName],
      routes: proxyRoutes({
        tokenKey: config.tokenKey,
        rail,
        railDeadlineMs: config.railDeadlineMs,
        notPaidMinAgeMs: 2 * config.railDeadlineMs + config.ambiguityMarginMs + config.admissionTimeoutMs,
        store,
        submit: durableSubmit,
        metrics,
        replicaId: config.replicaId,
        logger,
      }),
      registry,
      logger,
      readMaxBytes: REQUEST_MAX_BYTES["rail-proxy"],
      readTimeoutMs: config.readTimeoutMs,
      tls: config.transport,
      authz: POLICIES.railProxy,
    });
    return {
      ready: {
        port: server.port,
        metricsPort: server.metricsPort,
        replica_id: config.replicaId,
        fencing_enabled: store.statementGuards.mark && !controls?.markPrecheck,
        forward_budget_ms: guards.forwardBudgetMs ?? null,
      },
      drainBoundMs: config.drainMs + config.railDeadlineMs + 2000,
      async close() {
        stopSweeper();
        stopWarning();
        durability.stop();
        // In-flight submissions finish (rail answer recorded) before the pool closes.
        await server.close(config.drainMs + config.railDeadlineMs);
        await pool.end();
      },
    };
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}
