/**
 * The one way every railfence service serves: an HTTP/2 server (TLS with ALPN h2 and, when a CA
 * is configured, mutual TLS; cleartext h2c on loopback or when explicitly allowed) whose single
 * connect-node router speaks gRPC, gRPC-Web and Connect on one port, grpc.health.v1 beside the
 * service, and Prometheus /metrics on a second port.
 *
 * Every request first passes the request gate (request-gate.ts via gated-adapter.ts): read
 * deadline, size limit and strict decoding, refused with ErrorInfo before any handler runs.
 * Errors: an interceptor maps every handler failure to a ConnectError with ErrorInfo (never
 * leaking an internal message) and logs it once, here, at the boundary.
 */
import { Code, ConnectError, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { Server as HttpServer } from "node:http";
import type { Registry } from "prom-client";
import { errorReason, railError, REASONS, toConnectError } from "../domain/errors.js";
import { HealthState, ServingStatus } from "../rpc/health.js";
import type { Logger } from "../process/logger.js";
import { serveMetrics } from "../observability/metrics.js";
import { registerReflection } from "../rpc/reflection.js";
import { serverTracing } from "../observability/tracing.js";
import { authorization, type AuthzPolicy } from "./authz.js";
import { identityContextValues } from "../process/identity.js";
import { assertTransportAllowed, readTlsMaterial, serverSecureOptions, watchTlsFiles, type TlsConfig } from "../process/tls.js";
import { gatedConnectAdapter } from "./gated-adapter.js";
import { LIMITS } from "../domain/limits.js";
import { serverRpcMetrics } from "../observability/rpc-metrics.js";

export interface ServiceServerOptions {
  /** Service name for logs. */
  name: string;
  host: string;
  port: number;
  metricsHost?: string;
  metricsPort: number;
  /** Fully qualified gRPC service names reported by the health service. */
  serviceNames: string[];
  routes: (router: ConnectRouter) => void;
  registry: Registry;
  logger: Logger;
  /** Largest request message accepted (bytes, services/shared/domain/limits.ts); larger: invalid_argument REQUEST_TOO_LARGE. */
  readMaxBytes: number;
  /** Longest wait for a complete request body (READ_TIMEOUT_MS); at most LIMITS.readTimeoutMs. */
  readTimeoutMs?: number;
  interceptors?: Interceptor[];
  /** Longest a call may run on this server (its deadline if the client set none). */
  maxCallMs?: number;
  /** Transport security (services/shared/process/tls.ts); absent = h2c, allowed on loopback only. */
  tls?: TlsConfig;
  /** Who may call what; enforced whenever mutual TLS identifies callers (TLS_CA_FILE set). */
  authz?: AuthzPolicy;
  /** Answer unary gRPC calls on the direct path (default) or connect-node's (config rpcStack.directServer). */
  directUnary?: boolean;
}

/** Every call gets a deadline: the client's, or the server's own bound if it set none. */
function deadlineInterceptor(maxCallMs: number): Interceptor {
  return (next) => async (req) => {
    // A caller that set its own deadline is bounded by it (Connect aborts the call's signal);
    // only calls without one need the server's timer.
    if (req.header.has("grpc-timeout") || req.header.has("connect-timeout-ms")) return next(req);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(railError(REASONS.CALL_TIMEOUT, `call exceeded the server's ${maxCallMs} ms bound`)), maxCallMs);
    });
    try {
      return await Promise.race([next(req), expired]);
    } finally {
      clearTimeout(timer);
    }
  };
}

export interface RunningServer {
  port: number;
  metricsPort: number;
  health: HealthState;
  /**
   * Graceful drain: NOT_SERVING, stop accepting connections, let in-flight calls finish
   * within drainMs, then cut what is left.
   */
  close(drainMs: number): Promise<void>;
}

/**
 * Logs each failed call once and turns every thrown value into a client-safe ConnectError, for
 * streaming responses too: an error while a stream is being read (a deadline during Health/Watch)
 * is mapped the same way, so it still carries its ErrorInfo reason.
 */
function boundaryInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const refuse = (thrown: unknown): ConnectError => {
      // A stream cut by the call's own signal (deadline, caller gone) fails with the signal's
      // reason, not with whatever the aborted iterator threw (an AbortError would read "internal").
      // A caller that left is a cancellation, never "internal".
      const reason: unknown = req.signal.reason;
      const cut = reason instanceof ConnectError ? reason : new ConnectError("the call was cancelled", Code.Canceled);
      const err = req.signal.aborted && !(thrown instanceof ConnectError) ? cut : thrown;
      const ce = toConnectError(err);
      const entry = {
        event: "rpc_error",
        procedure: req.url.slice(req.url.lastIndexOf("/", req.url.lastIndexOf("/") - 1)),
        code: Code[ce.code],
        reason: errorReason(ce),
        duration_ms: Math.round((performance.now() - started) * 100) / 100,
      };
      if (ce.code === Code.Internal || ce.code === Code.Unknown) {
        const cause = ce.cause instanceof Error ? { name: ce.cause.name, message: ce.cause.message } : undefined;
        logger.error({ ...entry, cause }, "call failed");
      } else {
        logger.info(entry, "call rejected");
      }
      return ce;
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (err) {
      throw refuse(err);
    }
    if (!res.stream) return res;
    const message = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* message;
        } catch (err) {
          throw refuse(err);
        }
      })(),
    };
  };
}

/** Cleartext h2c or TLS (mutual when a CA is configured), with certificate reload. */
function createHttp2Server(opts: ServiceServerOptions, handler: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void) {
  const common = { settings: { maxConcurrentStreams: LIMITS.maxConcurrentStreams }, maxSessionMemory: 16 };
  const tls = opts.tls?.tls;
  if (!tls) return { server: http2.createServer(common, handler), stopWatching: () => {} };
  const mutual = tls.caFile !== undefined;
  const server = http2.createSecureServer(
    {
      ...common,
      ...serverSecureOptions(readTlsMaterial(tls)),
      allowHTTP1: false,
      ALPNProtocols: ["h2"],
      minVersion: "TLSv1.2",
      requestCert: mutual,
      rejectUnauthorized: mutual && tls.clientAuth === "require",
    },
    handler,
  );
  const stopWatching = watchTlsFiles(
    tls,
    (m) => {
      server.setSecureContext(serverSecureOptions(m));
      opts.logger.info({ event: "tls_reloaded", cert_file: tls.certFile }, "TLS certificate reloaded");
    },
    (err) =>
      opts.logger.warn({ event: "tls_reload_failed", error: err.message }, "TLS files changed but could not be loaded; keeping the previous certificate"),
  );
  // A failed handshake (no certificate, wrong CA) is the expected refusal; keep it out of the error log.
  server.on("tlsClientError", (err) => opts.logger.debug({ event: "tls_handshake_failed", error: err.message }, "TLS handshake refused"));
  return { server, stopWatching };
}

export async function startServiceServer(opts: ServiceServerOptions): Promise<RunningServer> {
  assertTransportAllowed(opts.host, opts.tls ?? { tls: undefined, allowInsecure: false });
  const mutual = opts.tls?.tls?.caFile !== undefined;
  const health = new HealthState(opts.serviceNames);
  const hardStop = new AbortController();
  const handler = gatedConnectAdapter({
    ...(opts.directUnary !== undefined ? { directUnary: opts.directUnary } : {}),
    routes: (router) => {
      health.register(router);
      opts.routes(router);
      registerReflection(router); // last: it describes every service registered above
    },
    // RED metrics outermost (rpc-metrics.ts: the adapter puts their interceptor first and counts
    // the calls it refuses itself), then tracing (its span sees the final error), then
    // authorization (logs its own denials once), then the boundary log + error mapping.
    rpcMetrics: serverRpcMetrics(opts.registry),
    interceptors: [
      serverTracing,
      ...(mutual ? [authorization(opts.authz ?? {}, opts.registry, opts.logger)] : []),
      boundaryInterceptor(opts.logger),
      deadlineInterceptor(opts.maxCallMs ?? LIMITS.maxCallMs),
      ...(opts.interceptors ?? []),
    ],
    contextValues: identityContextValues(),
    // The gate (request-gate.ts) enforces these before connect-node sees a request; connect-node
    // keeps them as a second line. It decompresses nothing itself any more (the gate hands it
    // uncompressed messages) but still negotiates response compression with these.
    limits: {
      maxMessageBytes: opts.readMaxBytes,
      readTimeoutMs: Math.min(opts.readTimeoutMs ?? LIMITS.readTimeoutMs, LIMITS.readTimeoutMs),
      maxTimeoutMs: LIMITS.maxTimeoutMs,
    },
    logger: opts.logger,
    acceptCompression: [compressionGzip, compressionBrotli],
    // The gate already refuses unknown JSON keys (request-decode.ts, decision 050); connect-node
    // reads streamed requests itself, and must not drop a typo there either.
    jsonOptions: { ignoreUnknownFields: false },
    readMaxBytes: opts.readMaxBytes,
    writeMaxBytes: LIMITS.writeMaxBytes,
    maxTimeoutMs: LIMITS.maxTimeoutMs,
    // Aborted only when the drain bound is exceeded: in-flight calls get to finish first.
    shutdownSignal: hardStop.signal,
  });

  const sessions = new Set<http2.ServerHttp2Session>();
  const { server, stopWatching } = createHttp2Server(opts, handler);
  server.maxConnections = LIMITS.maxConnections;
  server.setTimeout(LIMITS.idleSessionMs);
  // A stream that outlives the call bound (a slow client dribbling its body) is cancelled.
  const streamBoundMs = (opts.maxCallMs ?? LIMITS.maxCallMs) + 5000;
  server.on("stream", (stream) => stream.setTimeout(streamBoundMs, () => stream.close(http2.constants.NGHTTP2_CANCEL)));
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const metrics = await serveMetrics(opts.registry, opts.metricsHost ?? opts.host, opts.metricsPort, () => health.get("") === ServingStatus.SERVING);
  health.setAll(ServingStatus.SERVING);
  const port = (server.address() as AddressInfo).port;
  if (opts.tls?.tls && !mutual) {
    opts.logger.warn(
      { event: "tls_without_client_auth", server: opts.name },
      "TLS without TLS_CA_FILE: callers are not identified, so no per-method authorization",
    );
  }
  opts.logger.info(
    { event: "transport", server: opts.name, mode: opts.tls?.tls ? (mutual ? "mtls" : "tls") : "h2c", authorization: mutual },
    "transport configured",
  );

  let closing: Promise<void> | undefined;
  const close = (drainMs: number): Promise<void> => {
    closing ??= (async () => {
      health.setAll(ServingStatus.NOT_SERVING);
      stopWatching();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sessions) s.close(); // GOAWAY: no new streams, existing ones finish
      const timer = setTimeout(() => {
        hardStop.abort(railError(REASONS.SHUTTING_DOWN, "server shutting down", {}, { retryAfterMs: 1000 }));
        for (const s of sessions) s.destroy();
      }, drainMs);
      await closed;
      clearTimeout(timer);
      await closeHttp(metrics.server);
    })();
    return closing;
  };
  return { port, metricsPort: metrics.port, health, close };
}

function closeHttp(server: HttpServer): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
