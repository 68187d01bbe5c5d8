/**
 * Clients over both protocols a service speaks on its one port: binary gRPC and Connect JSON
 * over HTTP/2. Each pair owns its HTTP/2 sessions so a test file can close them all.
 */
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { bounded } from "./outcome.js";

export type Protocol = "grpc" | "connect-json";
export const PROTOCOLS: readonly Protocol[] = ["grpc", "connect-json"];

/** Session managers opened by this module, closed by closeAllClients(). */
export class ClientPool {
  private readonly managers: Http2SessionManager[] = [];

  /** A client of service at baseUrl over protocol. */
  client<S extends DescService>(service: S, baseUrl: string, protocol: Protocol, timeoutMs = 10_000): Client<S> {
    const sessionManager = new Http2SessionManager(baseUrl);
    this.managers.push(sessionManager);
    const transport =
      protocol === "grpc"
        ? createGrpcTransport({ baseUrl, sessionManager, defaultTimeoutMs: timeoutMs })
        : createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: false, sessionManager, defaultTimeoutMs: timeoutMs });
    return createClient(service, transport);
  }

  /** One client per protocol. */
  both<S extends DescService>(service: S, baseUrl: string): Record<Protocol, Client<S>> {
    return { grpc: this.client(service, baseUrl, "grpc"), "connect-json": this.client(service, baseUrl, "connect-json") };
  }

  close(): void {
    for (const m of this.managers.splice(0)) m.abort();
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
