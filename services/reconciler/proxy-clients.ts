/**
 * rail-proxy clients with client-side round robin over the replicas. The reconciler reads the
 * rail's statement through the proxy (GetRailStatement), so it never holds the rail credential
 * (ADR-007 D1). Every call here is a read or ResolveSubmission, which never forwards.
 */
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RailProxyService } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";

export type RailProxyClient = Client<typeof RailProxyService>;

/** Returns a function that hands out the next replica's client on every call. */
export function createProxyRoundRobin(baseUrls: string[]): () => RailProxyClient {
  if (baseUrls.length === 0) throw new Error("at least one rail-proxy URL is needed");
  const clients = baseUrls.map((baseUrl) => createClient(RailProxyService, createGrpcTransport({ baseUrl })));
  let i = 0;
  return () => {
    const c = clients[i % clients.length]!;
    i = (i + 1) % clients.length;
    return c;
  };
}
