/** Lock service composition root: config -> backend (pg: migrate lockdb first; or etcd) -> server. */
import { onShutdown, runMain } from "../shared/lifecycle.js";
import { createLogger } from "../shared/logger.js";
import { createRegistry } from "../shared/metrics.js";
import { requireMigrated } from "../shared/migrate.js";
import { createPool } from "../shared/pg.js";
import { POLICIES } from "../shared/authz.js";
import { startServiceServer } from "../shared/server.js";
import { REQUEST_MAX_BYTES } from "../shared/limits.js";
import { LockService } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import { readConfig, type LockConfig } from "./config.js";
import { createEtcdBackend } from "./etcd-backend.js";
import { createEtcdClient } from "./etcd-client.js";
import type { LockBackend } from "./lock-backend.js";
import { lockRoutes } from "./lock-handlers.js";
import { createLockMetrics } from "./lock-metrics.js";
import { createPgBackend, RELEASE_CHANNEL } from "./pg-backend.js";
import { PgListener } from "./pg-listener.js";
import type { Logger } from "../shared/logger.js";

const logger = createLogger("lock");

/** The only place that knows which backend is configured. */
async function openBackend(config: LockConfig, log: Logger): Promise<LockBackend> {
  if (config.backend === "pg") {
    const url = config.lockdbUrl!;
    const pool = createPool({ url, max: config.lockdbPoolMax, statementTimeoutMs: config.backendTimeoutMs, applicationName: "lock", primaryOnly: true });
    // The migration job migrates lockdb (the lock's own role cannot: least privilege).
    try {
      await requireMigrated(pool, "lockdb");
    } catch (err) {
      await pool.end();
      throw err;
    }
    // createPool forces synchronous_commit=on: a token handed out must survive a crash of
    // lockdb, or with asynchronous commit a grant could be acknowledged, lost, and reissued.
    const listener = new PgListener(url, RELEASE_CHANNEL, (connected) => log.info({ event: connected ? "listener_connected" : "listener_lost" }, "lockdb LISTEN connection"));
    listener.start();
    try {
      return await createPgBackend({ pool, listener, floor: config.tokenFloor });
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

runMain(logger, async () => {
  const config = readConfig();
  const backend = await openBackend(config, logger);
  const registry = createRegistry("lock");
  const metrics = createLockMetrics(registry, backend.name);
  metrics.tokenFloor.set({ backend: backend.name }, Number(backend.floor));

  const server = await startServiceServer({
    name: "lock",
    host: config.host,
    port: config.port,
    metricsPort: config.metricsPort,
    serviceNames: [LockService.typeName],
    routes: lockRoutes({ backend, metrics, tokenSigningKey: config.tokenSigningKey }),
    registry,
    logger,
    readMaxBytes: REQUEST_MAX_BYTES.lock,
    readTimeoutMs: config.readTimeoutMs,
    tls: config.transport,
    authz: POLICIES.lock,
  });
  logger.info(
    { event: "ready", port: server.port, metricsPort: server.metricsPort, backend: backend.name, token_floor: backend.floor.toString() },
    "lock ready",
  );

  onShutdown(logger, config.drainMs + 2000, async () => {
    // Waiting acquires end at the drain bound (their signal aborts); then the backend closes.
    await server.close(config.drainMs);
    await backend.close();
  });
});
