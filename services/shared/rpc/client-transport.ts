/**
 * The transport every service-to-service client uses: gRPC, W3C trace context on every call
 * (clientTracing first, so later interceptors run inside the client span), one HTTP/2
 * connection kept warm between calls, and, with TLS, this process's certificate as its
 * identity. A call made while serving one carries that call's x-request-id on (decision 054). With
 * the process's registry, every call is timed and counted by outcome, transport failures included
 * (railfence_rpc_client_duration_seconds, rpc-metrics.ts). No retries here: where a retry is safe
 * the caller does it explicitly.
 */
import type { Interceptor } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createUnaryGrpcTransport } from "./grpc-unary-client.js";
import { clientTlsOptions, type TlsSettings } from "../process/tls.js";
import { clientTracing } from "../observability/tracing.js";
import { currentCall, REQUEST_ID_HEADER } from "../process/call-context.js";
import { clientRpcMetrics } from "../observability/rpc-metrics.js";

/** Passes the served call's request id on to the service it calls, so one id spans the hops. */
const requestIdPropagation: Interceptor = (next) => (req) => {
  const requestId = currentCall()?.requestId;
  if (requestId !== undefined && !req.header.has(REQUEST_ID_HEADER)) req.header.set(REQUEST_ID_HEADER, requestId);
  return next(req);
};

/** Connection timing of one client (defaults: PING every 30 s, 10 s to connect), and where its calls are counted. */
export interface ConnectionTiming {
  pingIntervalMs?: number;
  connectTimeoutMs?: number;
  /** Harness negative control only (grpc-unary-client.ts). */
  unguardedSend?: boolean;
  /** Connect when the client is made, so the first call does not pay for it. */
  connectAtStart?: boolean;
  /** The process's registry: every call is counted in railfence_rpc_client_duration_seconds (rpc-metrics.ts). */
  registry?: Registry;
  /** Unary calls on the direct path (default) or connect-node's (config rpcStack.directClient). */
  directUnary?: boolean;
}

export function serviceTransport(
  baseUrl: string,
  tls: Pick<TlsSettings, "certFile" | "keyFile" | "caFile"> | undefined,
  interceptors: Interceptor[] = [],
  timing: ConnectionTiming = {},
) {
  const registry = timing.registry;
  const nodeOptions = clientTlsOptions(tls);
  const options = {
    baseUrl,
    // Metrics outermost: the duration covers everything the caller waits for.
    interceptors: [...(registry ? [clientRpcMetrics(registry)] : []), clientTracing, requestIdPropagation, ...interceptors],
    pingIntervalMs: timing.pingIntervalMs ?? 30_000,
    idleConnectionTimeoutMs: 300_000,
    ...(timing.connectTimeoutMs !== undefined ? { connectTimeoutMs: timing.connectTimeoutMs } : {}),
    ...(timing.unguardedSend ? { unguardedSend: true } : {}),
    ...(timing.connectAtStart ? { connectAtStart: true } : {}),
    ...(nodeOptions ? { nodeOptions } : {}),
  };
  const streams = createGrpcTransport(options);
  // Unary calls (every call railfence's services make) skip connect-node's pipeline
  // (grpc-unary-client.ts, decision 006); RAILFENCE_CONNECT_UNARY=1 keeps them on it, for the bench.
  if (timing.directUnary === false) return streams;
  return createUnaryGrpcTransport(options, streams);
}
