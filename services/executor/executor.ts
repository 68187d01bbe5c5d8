/**
 * An executor, built from its config: paydb (primary only, migrated) -> the lock and rail-proxy
 * clients -> UC-05 per payout (pay-one.ts), traced as a child of the payout's CreatePayout span ->
 * the claim loop (worker.ts), plus /metrics. A worker, not a server: it has no RPC port, and it is
 * untrusted by design (INV-07): nothing here is a guard. main.ts only reads the environment; the
 * harness builds it with other behaviour (ExecutorControls) to stage a stale holder or a dishonest one.
 */
import { context } from "@opentelemetry/api";
import type { RunningService } from "../shared/observability/lifecycle.js";
import type { Logger } from "../shared/process/logger.js";
import { createRegistry, serveMetrics } from "../shared/observability/metrics.js";
import { requireMigrated } from "../shared/db/migrate.js";
import { createPool } from "../shared/db/pg.js";
import { PgListener } from "../shared/db/pg-listener.js";
import { contextFromTraceparent, inSpan } from "../shared/observability/tracing.js";
import { createLockClient, createProxyPool } from "./clients.js";
import type { SubmissionReferenceMode } from "../shared/domain/submission-ref.js";
import type { ExecutorConfig } from "./config.js";
import { createExecutorMetrics } from "./executor-metrics.js";
import { createPayOne, type PayOne } from "./pay-one.js";
import { createPayoutStore, PAYABLE_CHANNEL, type ClaimedPayout } from "./payout-store.js";
import { listenerName, startResponders } from "./responders.js";
import { startWorker } from "./worker.js";

/**
 * Behaviour a drill or test gives an executor to stage a failure (the product has no setting for
 * any of it; decision 064): a pause right before SubmitPayout (a stale-holder window on demand),
 * attempt-shaped references (the untrusted worst case, shared/domain/submission-ref.ts), and NOT_FOUND
 * after a lost answer read as "never sent" (the reading before decision 023), and every ACCEPTED
 * answer read as "the proxy closed the payout" whether it says so or not (decision 072's control).
 */
export interface ExecutorControls {
  /** Names of what is planted, for the warning at start. */
  planted: readonly string[];
  pauseAfterFenceMs?: number;
  submissionReference?: SubmissionReferenceMode;
  trustNotFound?: boolean;
  /** Every ACCEPTED answer read as "the proxy closed the payout", payout_closed or not (a control for decision 072). */
  trustAccepted?: boolean;
}

export async function startExecutor(config: ExecutorConfig, deps: { logger: Logger; controls?: ExecutorControls }): Promise<RunningService> {
  const { logger, controls } = deps;
  if (controls && controls.planted.length > 0) {
    logger.warn(
      { event: "harness_controls", planted: controls.planted },
      `harness controls are planted (${controls.planted.join(", ")}): a drill or test process, never production`,
    );
  }
  const registry = createRegistry("executor");
  const pool = createPool({ url: config.paydbUrl, max: config.concurrency + 2, primaryOnly: true, applicationName: `executor/${config.executorId}`, registry });
  try {
    // Fail start-up (exit 70) when paydb is unreachable or behind this build, rather than report
    // ready and do nothing.
    await requireMigrated(pool, "paydb");
    const metrics = createExecutorMetrics(registry);
    const store = createPayoutStore(pool, {
      maxBatch: config.batchMax,
      maxInFlight: config.batchesInFlight,
      onBatch: (statement, size) => metrics.paydbBatchSize.observe({ statement }, size),
    });
    // The payout's trace continues here: the executor's span is a CHILD of the CreatePayout span
    // stored on the row (docs/decisions/003-trace-per-payout.md), so one trace covers the payout.
    const traced = <T>(p: ClaimedPayout, fn: () => Promise<T>): Promise<T> =>
      context.with(contextFromTraceparent(p.traceparent), () =>
        inSpan(
          "executor PayPayout",
          { "railfence.payout_id": p.payoutId, "railfence.account_id": p.accountId, "railfence.executor_id": config.executorId },
          async (span) => {
            const outcome = await fn();
            span.setAttribute("railfence.outcome", String(outcome));
            return outcome;
          },
        ),
      );
    const untraced = createPayOne({
      traced,
      store,
      lock: createLockClient(config.lockUrl, config.transport.tls, { registry, directUnary: config.rpcStack.directClient }),
      proxies: createProxyPool(config.railProxyUrls, config.transport.tls, { registry, directUnary: config.rpcStack.directClient }),
      metrics,
      logger,
      executorId: config.executorId,
      leaseTtlMs: config.leaseTtlMs,
      lockWaitMs: config.lockWaitMs,
      callTimeoutMs: config.callTimeoutMs,
      pauseAfterFenceMs: controls?.pauseAfterFenceMs ?? 0,
      submissionReference: controls?.submissionReference ?? "payout",
      pollIntervalMs: config.pollIntervalMs,
      settlementWindowMs: config.settlementWindowMs,
      clockSkewAllowanceMs: config.clockSkewAllowanceMs,
      trustNotFound: controls?.trustNotFound ?? false,
      trustAccepted: controls?.trustAccepted ?? false,
    });
    const payOne: PayOne = (p, signal) => traced(p, () => untraced(p, signal));
    const metricsServer = await serveMetrics(registry, config.host, config.metricsPort);
    const notified = config.wake === "notify";
    const responders =
      notified && config.answer === "one"
        ? startResponders({
            executorId: config.executorId,
            listening: () => store.listeningExecutors(),
            refreshMs: config.peersRefreshMs,
            logger,
            onView: (size) => metrics.responders.set(size),
          })
        : undefined;
    const worker = startWorker({
      store,
      payOne,
      metrics,
      logger,
      executorId: config.executorId,
      concurrency: config.concurrency,
      pollIntervalMs: config.pollIntervalMs,
      claimMs: config.lockWaitMs + config.callTimeoutMs,
      claimAfterEveryFinish: !notified,
      responders,
      // Only where one executor answers each notification: with every executor answering, each
      // would take the account's lock for the same payout.
      payNext: responders ? untraced.payNext : undefined,
    });
    const listener = notified ? listenForPayable(config, logger, (senderPid, accountId) => worker.nudge(senderPid, accountId)) : undefined;
    return {
      ready: { port: 0, metricsPort: metricsServer.port, executor_id: config.executorId, proxies: config.railProxyUrls.length },
      // Drain bound, then one call timeout for a submission already on the wire, then slack.
      drainBoundMs: config.drainMs + 2 * config.callTimeoutMs + 2000,
      async close() {
        await listener?.close();
        responders?.close();
        await worker.stop(config.drainMs);
        // The leases of the last payouts: released before the executor goes (each bounded by the call timeout).
        await untraced.releasesSettled();
        await new Promise<void>((resolve) => {
          metricsServer.server.close(() => resolve());
          metricsServer.server.closeAllConnections();
        });
        await pool.end();
      },
    };
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
}

/**
 * paydb's "payouts became payable" notifications (migration 021), on a connection of their own
 * (not the pool's), each one ending the worker's idle wait. While the connection is down the
 * worker polls as it always does and the listener reconnects with backoff; the outage is logged
 * once, and on reconnecting the worker claims at once (what was announced meanwhile was lost).
 */
function listenForPayable(config: ExecutorConfig, logger: Logger, nudge: (senderPid?: number, accountId?: string) => void): PgListener {
  const listener = new PgListener({
    url: config.paydbUrl,
    channel: PAYABLE_CHANNEL,
    applicationName: listenerName(config.executorId),
    retryInitialMs: 500,
    retryMaxMs: 15_000,
    onStateChange: (connected) =>
      connected
        ? logger.info({ event: "listener_connected" }, "paydb LISTEN connection up; payable payouts are announced")
        : logger.warn(
            { event: "listener_lost", poll_interval_ms: config.pollIntervalMs },
            "paydb LISTEN connection lost; polling every POLL_INTERVAL_MS until it is back",
          ),
  });
  // The payload names the payout's account (migration 025); empty: claim to find out.
  listener.subscribeAll((senderPid, payload) => nudge(senderPid, payload || undefined));
  listener.start();
  return listener;
}
