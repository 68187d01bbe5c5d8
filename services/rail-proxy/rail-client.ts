/**
 * The only rail client in railfence (ADR-007 D1). It attaches the credential to every call and
 * makes exactly one attempt per submission, bounded by a deadline. It never retries (FR-20):
 * a retry to a non-idempotent rail is a second payment.
 */
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RailService } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import { clientTracing } from "../shared/tracing.js";
import { clientTlsOptions, type TlsSettings } from "../shared/tls.js";

/** tls: with mutual TLS the proxy's certificate (identity rail-proxy) is checked by the rail too. */
export function createRailClient(baseUrl: string, credential: string, tls?: TlsSettings) {
  const nodeOptions = clientTlsOptions(tls);
  const authorization = `Bearer ${credential}`;
  const withCredential: Interceptor = (next) => (req) => {
    req.header.set("authorization", authorization);
    return next(req);
  };
  const transport = createGrpcTransport({
    baseUrl,
    // The credential rides in a header that tracing never records (spans carry rpc.* attributes only).
    interceptors: [clientTracing, withCredential],
    // Keep the HTTP/2 connection warm between submissions.
    pingIntervalMs: 30_000,
    idleConnectionTimeoutMs: 300_000,
    ...(nodeOptions ? { nodeOptions } : {}),
  });
  return createClient(RailService, transport);
}

export type RailClient = ReturnType<typeof createRailClient>;
