/**
 * The only rail client in railfence (ADR-007 D1). It attaches the credential to every call and
 * makes exactly one attempt per submission, bounded by a deadline. It never retries (FR-20):
 * a retry to a non-idempotent rail is a second payment.
 */
import { createClient, type Interceptor } from "@connectrpc/connect";
import { serviceTransport } from "../shared/client-transport.js";
import { RailService } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import type { TlsSettings } from "../shared/tls.js";

/** tls: with mutual TLS the proxy's certificate (identity rail-proxy) is checked by the rail too. */
export function createRailClient(baseUrl: string, credential: string, tls?: TlsSettings) {
  const authorization = `Bearer ${credential}`;
  const withCredential: Interceptor = (next) => (req) => {
    req.header.set("authorization", authorization);
    return next(req);
  };
  // The credential rides in a header that tracing never records (spans carry rpc.* attributes only).
  return createClient(RailService, serviceTransport(baseUrl, tls, [withCredential]));
}

export type RailClient = ReturnType<typeof createRailClient>;
