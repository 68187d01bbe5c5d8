/**
 * The fuzzers' clients, over both protocols a service speaks on its one port (binary gRPC and
 * Connect JSON over HTTP/2): the tests' ClientPool (tools/harness/clients.ts) with every call
 * bounded, each client on sessions of its own so a test file can close them all.
 */
import { Health, HealthCheckResponse_ServingStatus } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { ClientPool as SessionPool, PROTOCOLS, type Protocol } from "../support/clients.js";
import { bounded } from "./outcome.js";

export { PROTOCOLS, type Protocol };

/** A ClientPool whose calls time out after 10 s unless a client says otherwise. */
export class ClientPool extends SessionPool {
  constructor() {
    super({ timeoutMs: 10_000 });
  }
}

/**
 * The liveness verdict after a fuzz run: a fresh connection, over each protocol, gets
 * grpc.health.v1 Check SERVING within a bound.
 */
export async function expectServing(baseUrl: string): Promise<void> {
  const pool = new ClientPool();
  try {
    for (const protocol of PROTOCOLS) {
      const res = await bounded(pool.client(Health, baseUrl, protocol).check({ service: "" }), 5000, `health ${baseUrl} (${protocol})`);
      if (res.status !== HealthCheckResponse_ServingStatus.SERVING) {
        throw new Error(`${baseUrl} answered health ${HealthCheckResponse_ServingStatus[res.status]} over ${protocol}`);
      }
    }
  } finally {
    pool.close();
  }
}
