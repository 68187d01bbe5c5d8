/**
 * rail-proxy clients for the reconciler: the shared round robin over the replicas. The
 * reconciler reads the rail's statement through the proxy (GetRailStatement), so it never holds
 * the rail credential (ADR-007 D1). Every call here is a read or ResolveSubmission, which never
 * forwards.
 */
import { createProxyPool, type RailProxyClient } from "../shared/proxy-pool.js";
import type { TlsSettings } from "../shared/tls.js";

export type { RailProxyClient };

/** Returns a function that hands out the next replica's client on every call. */
export function createProxyRoundRobin(baseUrls: string[], tls?: TlsSettings): () => RailProxyClient {
  const pool = createProxyPool(baseUrls, tls);
  return () => pool.next();
}
