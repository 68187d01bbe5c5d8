/**
 * Clients the executor uses: the lock service, and the rail-proxy replicas with client-side
 * round robin (a new replica per call, like a Kubernetes Service spreading connections), so a
 * dead replica costs one call, not the executor's whole throughput.
 *
 * None of these clients retries anything: SubmitPayout must never be retried (C3 §3.8), and
 * the places where a retry is safe (reads) do it explicitly.
 */
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LockService } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import { clientTracing } from "../shared/tracing.js";
import { clientTlsOptions, type TlsSettings } from "../shared/tls.js";

function transport(baseUrl: string, tls: TlsSettings | undefined) {
  // With TLS configured the executor's certificate is its identity at the lock service.
  const nodeOptions = clientTlsOptions(tls);
  return createGrpcTransport({ baseUrl, interceptors: [clientTracing], pingIntervalMs: 30_000, idleConnectionTimeoutMs: 300_000, ...(nodeOptions ? { nodeOptions } : {}) });
}

export type LockClient = Client<typeof LockService>;
export type { RailProxyClient } from "../shared/proxy-pool.js";

export function createLockClient(baseUrl: string, tls?: TlsSettings): LockClient {
  return createClient(LockService, transport(baseUrl, tls));
}

export { createProxyPool, type ProxyPool } from "../shared/proxy-pool.js";
