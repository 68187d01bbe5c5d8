/**
 * rail-proxy clients with client-side round robin over the replicas (a new replica per call,
 * like a Kubernetes Service spreading connections), so a dead replica costs one call, not a
 * worker's whole throughput. Shared by the executor and the reconciler.
 *
 * None of these clients retries anything: SubmitPayout must never be retried (C3 §3.8), and
 * the places where a retry is safe (reads) do it explicitly.
 */
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { type ConnectionTiming, serviceTransport } from "./client-transport.js";
import { RailProxyService } from "../gen/railfence/railproxy/v1/rail_proxy_pb.js";
import type { TlsSettings } from "../process/tls.js";

export type RailProxyClient = Client<typeof RailProxyService>;

/** Round robin over the replicas: each call of next() returns the following replica's client. */
export interface ProxyPool {
  next(): RailProxyClient;
  readonly size: number;
}

/** How long a replica that failed to answer (UNAVAILABLE) is skipped by the round robin. */
const EJECT_MS = 2000;

/**
 * Round robin with passive outlier ejection: a replica whose call failed with UNAVAILABLE (not
 * reachable, or draining) is skipped for a short while, so the rotation cannot keep landing the
 * same kind of call on a dead replica. When every replica is ejected, plain rotation resumes.
 * With `registry`, every call is counted in railfence_rpc_client_duration_seconds (all replicas
 * in one series: the replica is no label).
 */
export function createProxyPool(
  baseUrls: string[],
  tls?: Pick<TlsSettings, "certFile" | "keyFile" | "caFile">,
  client: Pick<ConnectionTiming, "registry" | "directUnary"> = {},
): ProxyPool {
  if (baseUrls.length === 0) throw new Error("at least one rail-proxy URL is needed");
  const ejectedUntil = baseUrls.map(() => 0);
  const clients = baseUrls.map((baseUrl, idx) => {
    const watch: Interceptor = (next) => async (req) => {
      try {
        const res = await next(req);
        ejectedUntil[idx] = 0;
        return res;
      } catch (err) {
        if (ConnectError.from(err).code === Code.Unavailable) ejectedUntil[idx] = Date.now() + EJECT_MS;
        throw err;
      }
    };
    // This process's certificate is its identity at the proxy (mutual TLS); https:// URLs only.
    return createClient(RailProxyService, serviceTransport(baseUrl, tls, [watch], client));
  });
  let i = 0;
  return {
    next() {
      const now = Date.now();
      for (let tries = 0; tries < clients.length; tries++) {
        const idx = (i + tries) % clients.length;
        if (ejectedUntil[idx]! <= now) {
          i = (idx + 1) % clients.length;
          return clients[idx]!;
        }
      }
      const c = clients[i % clients.length]!;
      i = (i + 1) % clients.length;
      return c;
    },
    size: clients.length,
  };
}
