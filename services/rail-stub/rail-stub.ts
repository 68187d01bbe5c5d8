/**
 * The rail stub (the fictional third party), built from its config: raildb -> ledger -> the rail
 * server and, for tests and drills, its fault-control server. main.ts only reads the environment.
 */
import { Counter } from "prom-client";
import type { RunningService } from "../shared/observability/lifecycle.js";
import type { Logger } from "../shared/process/logger.js";
import { createRegistry } from "../shared/observability/metrics.js";
import { migrate } from "../shared/db/migrate.js";
import { createPool } from "../shared/db/pg.js";
import { POLICIES } from "../shared/edge/authz.js";
import { startServiceServer } from "../shared/edge/server.js";
import { REQUEST_MAX_BYTES } from "../shared/domain/limits.js";
import { RailService } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import { RailControlService } from "../shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { requireCredential } from "./auth.js";
import type { RailStubConfig } from "./config.js";
import { controlRoutes } from "./control-handlers.js";
import { FaultPlan, parseFaults } from "./faults.js";
import { createLedgerStore } from "./ledger-store.js";
import { railRoutes } from "./rail-handlers.js";

export async function startRailStub(config: RailStubConfig, deps: { logger: Logger }): Promise<RunningService> {
  const { logger } = deps;
  // The stub owns raildb outright (it plays a third party), so it migrates its own schema.
  await migrate(config.raildbUrl, "raildb");
  const registry = createRegistry("rail-stub");
  const pool = createPool({ url: config.raildbUrl, max: 20, applicationName: "rail-stub", registry });
  const metrics = {
    payments: new Counter({
      name: "railfence_rail_stub_payments_total",
      help: "Payments booked by the stub rail",
      labelNames: ["status"] as const,
      registers: [registry],
    }),
  };
  const faults = new FaultPlan();
  if (config.faultsJson) faults.replace(parseFaults(config.faultsJson));

  const server = await startServiceServer({
    name: "rail-stub",
    host: config.host,
    port: config.port,
    directUnary: config.rpcStack.directServer,
    metricsPort: config.metricsPort,
    serviceNames: [RailService.typeName],
    routes: railRoutes(createLedgerStore(pool, config.batchMax), faults, metrics),
    registry,
    logger,
    readMaxBytes: REQUEST_MAX_BYTES["rail-stub"],
    readTimeoutMs: config.readTimeoutMs,
    interceptors: [requireCredential(RailService.typeName, config.credential)],
    tls: config.transport,
    authz: POLICIES.railStub,
  });
  const control =
    config.controlPort === undefined
      ? undefined
      : await startServiceServer({
          name: "rail-stub-control",
          host: config.host,
          port: config.controlPort,
          directUnary: config.rpcStack.directServer,
          metricsPort: 0,
          serviceNames: [RailControlService.typeName],
          routes: controlRoutes(faults),
          readMaxBytes: REQUEST_MAX_BYTES["rail-stub-control"],
          readTimeoutMs: config.readTimeoutMs,
          registry,
          logger,
          tls: config.transport,
          authz: POLICIES.railControl,
        });
  return {
    ready: { port: server.port, metricsPort: server.metricsPort, controlPort: control?.port },
    drainBoundMs: config.drainMs + 2000,
    async close() {
      await Promise.all([server.close(config.drainMs), control?.close(config.drainMs)]);
      await pool.end();
    },
  };
}
