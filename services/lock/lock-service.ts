/**
 * The lock service, built from its config: the backend (pg on a migrated lockdb, or etcd) -> the
 * RPC server. main.ts only reads the environment and wires signals.
 */
import type { RunningService } from "../shared/observability/lifecycle.js";
import type { Registry } from "prom-client";
import { createRegistry } from "../shared/observability/metrics.js";
import { requireMigrated } from "../shared/db/migrate.js";
import { createPool } from "../shared/db/pg.js";
import { POLICIES } from "../shared/edge/authz.js";
import { startServiceServer } from "../shared/edge/server.js";
import { REQUEST_MAX_BYTES } from "../shared/domain/limits.js";
import { LockService } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import type { LockConfig } from "./config.js";
import { createEtcdBackend } from "./etcd-backend.js";
import { createEtcdClient } from "./etcd-client.js";
import type { LockBackend } from "./lock-backend.js";
import { lockRoutes } from "./lock-handlers.js";
import { createLockDbMetrics, createLockMetrics } from "./lock-metrics.js";
import { createPgBackend, RELEASE_CHANNEL } from "./pg-backend.js";
import { PgListener } from "../shared/db/pg-listener.js";
import type { Logger } from "../shared/process/logger.js";

/** The only place that knows which backend is configured. */
async function openBackend(config: LockConfig, log: Logger, registry: Registry): Promise<LockBackend> {
  if (config.backend === "pg") {
    const url = config.lockdbUrl!;
    const pool = createPool({
      url,
      max: config.lockdbPoolMax,
      statementTimeoutMs: config.backendTimeoutMs,
      applicationName: "lock",
      primaryOnly: true,
      registry,
    });
    // The migration job migrates lockdb (the lock's own role cannot: least privilege).
    try {
      await requireMigrated(pool, "lockdb");
    } catch (err) {
      await pool.end();
      throw err;
    }
    // createPool forces synchronous_commit=on: a token handed out must survive a crash of
    // lockdb, or with asynchronous commit a grant could be acknowledged, lost, and reissued.
    const listener = new PgListener({
      url,
      channel: RELEASE_CHANNEL,
      applicationName: "lock/listener",
      onStateChange: (connected) => log.info({ event: connected ? "listener_connected" : "listener_lost" }, "lockdb LISTEN connection"),
    });
    listener.start();
    try {
      const { batchSize, releases } = createLockDbMetrics(registry);
      const batching = {
        maxBatch: config.lockdbBatchMax,
        maxInFlight: config.lockdbBatchesInFlight,
        onBatch: (statement: string, size: number) => batchSize.observe({ statement }, size),
        releaseCarryMs: config.lockdbReleaseCarryMs,
        onRelease: (committed: "carried" | "alone") => releases.inc({ committed }),
      };
      return await createPgBackend({ pool, listener, floor: config.tokenFloor, batching });
    } catch (err) {
      await listener.close();
      await pool.end();
      throw err;
    }
  }
  const client = createEtcdClient({ endpoints: config.etcdEndpoints, callTimeoutMs: config.backendTimeoutMs });
  try {
    return await createEtcdBackend({ client, prefix: config.etcdPrefix, floor: config.tokenFloor });
  } catch (err) {
    client.close();
    throw err;
  }
}

export async function startLockService(config: LockConfig, deps: { logger: Logger }): Promise<RunningService> {
  const registry = createRegistry("lock");
  const backend = await openBackend(config, deps.logger, registry);
  try {
    const metrics = createLockMetrics(registry, backend.name);
    metrics.tokenFloor.set({ backend: backend.name }, Number(backend.floor));
    const server = await startServiceServer({
      name: "lock",
      host: config.host,
      port: config.port,
      directUnary: config.rpcStack.directServer,
      metricsPort: config.metricsPort,
      serviceNames: [LockService.typeName],
      routes: lockRoutes({ backend, metrics, tokenSigningKey: config.tokenSigningKey }),
      registry,
      logger: deps.logger,
      readMaxBytes: REQUEST_MAX_BYTES.lock,
      readTimeoutMs: config.readTimeoutMs,
      tls: config.transport,
      authz: POLICIES.lock,
    });
    return {
      ready: { port: server.port, metricsPort: server.metricsPort, backend: backend.name, token_floor: backend.floor.toString() },
      drainBoundMs: config.drainMs + 2000,
      async close() {
        // Waiting acquires end at the drain bound (their signal aborts); then the backend closes.
        await server.close(config.drainMs);
        await backend.close();
      },
    };
  } catch (err) {
    await backend.close().catch(() => {});
    throw err;
  }
}
