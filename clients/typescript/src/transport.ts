/**
 * Transports: gRPC (railfence's primary protocol) or Connect (binary or JSON), over HTTP/2, with
 * mutual TLS when certificates are given, one warm HTTP/2 session per endpoint (closed by
 * close()), and OpenTelemetry propagation on every call.
 */
import { readFileSync } from "node:fs";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { tracingInterceptor } from "./tracing.js";

/** PEM material for mutual TLS: this client's certificate and key, and the CA its servers chain to. */
export interface TlsOptions {
  cert?: string | Buffer;
  key?: string | Buffer;
  ca?: string | Buffer;
  /** Name to verify the server's certificate against, when it differs from the URL's host. */
  serverName?: string;
}

/** Reads TLS material from files (e.g. a mounted Kubernetes Secret), once. */
export function tlsFromFiles(files: { certFile?: string; keyFile?: string; caFile?: string; serverName?: string }): TlsOptions {
  return {
    ...(files.certFile ? { cert: readFileSync(files.certFile) } : {}),
    ...(files.keyFile ? { key: readFileSync(files.keyFile) } : {}),
    ...(files.caFile ? { ca: readFileSync(files.caFile) } : {}),
    ...(files.serverName ? { serverName: files.serverName } : {}),
  };
}

export interface TransportOptions {
  /** "grpc" (default) or "connect". */
  protocol?: "grpc" | "connect";
  /** Connect only: JSON instead of binary protobuf (default false). */
  json?: boolean;
  tls?: TlsOptions;
  /** Start a CLIENT span per attempt and propagate trace context (default true). */
  tracing?: boolean;
  /** Interceptors run inside the tracing span (e.g. authentication headers). */
  interceptors?: Interceptor[];
}

/** One transport per endpoint, sharing its HTTP/2 session between calls. */
export class Transports {
  private readonly sessions = new Map<string, Http2SessionManager>();
  private readonly transports = new Map<string, Transport>();

  constructor(private readonly o: TransportOptions) {}

  get(baseUrl: string): Transport {
    let t = this.transports.get(baseUrl);
    if (t) return t;
    const tls = this.o.tls;
    const nodeOptions = tls ? { ...(tls.cert ? { cert: tls.cert } : {}), ...(tls.key ? { key: tls.key } : {}), ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.serverName ? { servername: tls.serverName } : {}) } : undefined;
    const session = new Http2SessionManager(baseUrl, { pingIntervalMs: 30_000, idleConnectionTimeoutMs: 60_000 }, nodeOptions);
    this.sessions.set(baseUrl, session);
    const interceptors = [...(this.o.tracing === false ? [] : [tracingInterceptor]), ...(this.o.interceptors ?? [])];
    t =
      this.o.protocol === "connect"
        ? createConnectTransport({ baseUrl, httpVersion: "2", sessionManager: session, useBinaryFormat: !this.o.json, interceptors })
        : createGrpcTransport({ baseUrl, sessionManager: session, interceptors });
    this.transports.set(baseUrl, t);
    return t;
  }

  /** Closes every HTTP/2 session (calls in flight fail). */
  close(): void {
    for (const s of this.sessions.values()) s.abort();
    this.sessions.clear();
    this.transports.clear();
  }
}
