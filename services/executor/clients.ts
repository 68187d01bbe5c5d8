/**
 * Clients the executor uses: the lock service, and the rail-proxy replicas with client-side
 * round robin (a new replica per call, like a Kubernetes Service spreading connections), so a
 * dead replica costs one call, not the executor's whole throughput.
 *
 * None of these clients retries anything: SubmitPayout must never be retried (C3 §3.8), and
 * the places where a retry is safe (reads) do it explicitly.
 */
import { createClient, type Client } from "@connectrpc/connect";
import { type ConnectionTiming, serviceTransport } from "../shared/rpc/client-transport.js";
import { LockService } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import type { TlsSettings } from "../shared/process/tls.js";

export type LockClient = Client<typeof LockService>;
export type { RailProxyClient } from "../shared/rpc/proxy-pool.js";

/** With TLS configured the executor's certificate is its identity at the lock service. */
export function createLockClient(baseUrl: string, tls?: TlsSettings, client: Pick<ConnectionTiming, "registry" | "directUnary"> = {}): LockClient {
  return createClient(LockService, serviceTransport(baseUrl, tls, [], client));
}

export { createProxyPool, type ProxyPool } from "../shared/rpc/proxy-pool.js";
