/**
 * Transports: gRPC (railfence's primary protocol) or Connect (binary or JSON), over HTTP/2, with
 * mutual TLS when certificates are given, one warm HTTP/2 session per endpoint (closed by
 * close()), and OpenTelemetry propagation on every call.
 *
 * Certificates given as files (`tlsFiles`) rotate without a restart, as the servers' do: the
 * files' metadata is polled (fs.watchFile survives the atomic symlink swap of a Kubernetes Secret
 * volume, fs.watch does not), a new pair is checked with createSecureContext before it is used
 * (a half-written rotation keeps the old one), and the next call opens a new HTTP/2 session with
 * it. The old session is left to finish its calls and closed a grace period later.
 */
import { readFileSync, unwatchFile, watchFile } from "node:fs";
import { createSecureContext } from "node:tls";
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

/** Where this client's TLS material lives (e.g. a mounted Kubernetes Secret). */
export interface TlsFiles {
  certFile?: string;
  keyFile?: string;
  caFile?: string;
  /** Name to verify the server's certificate against, when it differs from the URL's host. */
  serverName?: string;
  /** How often the files' metadata is polled for a rotation (default 5 s). */
  reloadIntervalMs?: number;
}

/**
 * Reads TLS material from files, once: a rotation on disk is NOT seen. A long-running client
 * passes `tlsFiles` to createRailfenceClient instead, which re-reads the files when they change.
 */
export function tlsFromFiles(files: TlsFiles): TlsOptions {
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
  /** TLS material from files, re-read when they change (certificate rotation); wins over `tls`. */
  tlsFiles?: TlsFiles;
  /** Start a CLIENT span per attempt and propagate trace context (default true). */
  tracing?: boolean;
  /** Interceptors run inside the tracing span (e.g. authentication headers). */
  interceptors?: Interceptor[];
}

/** How long a session replaced by a certificate rotation may finish its calls before it is closed. */
const RETIRED_SESSION_GRACE_MS = 60_000;

/**
 * One transport per endpoint, sharing its HTTP/2 session between calls; rebuilt on the next call
 * after the TLS files changed.
 */
export class Transports {
  private readonly sessions = new Map<string, Http2SessionManager>();
  private readonly transports = new Map<string, { transport: Transport; generation: number }>();
  private readonly retired = new Set<Http2SessionManager>();
  private tls: TlsOptions | undefined;
  /** Bumped on every TLS material change that passed createSecureContext. */
  private generation = 0;
  private readonly stopWatching: () => void = () => {};

  constructor(private readonly o: TransportOptions) {
    this.tls = o.tls;
    if (o.tlsFiles) {
      const files = o.tlsFiles;
      this.tls = tlsFromFiles(files);
      this.stopWatching = watchFiles(files, () => {
        const next = tlsFromFiles(files);
        // A cert and key that do not match yet (a rotation half written) throw here: keep the old.
        createSecureContext({ ...(next.cert ? { cert: next.cert } : {}), ...(next.key ? { key: next.key } : {}), ...(next.ca ? { ca: next.ca } : {}) });
        this.tls = next;
        this.generation++;
      });
    }
  }

  get(baseUrl: string): Transport {
    const current = this.transports.get(baseUrl);
    if (current && current.generation === this.generation) return current.transport;
    if (current) this.retire(baseUrl);
    const tls = this.tls;
    const nodeOptions = tls
      ? {
          ...(tls.cert ? { cert: tls.cert } : {}),
          ...(tls.key ? { key: tls.key } : {}),
          ...(tls.ca ? { ca: tls.ca } : {}),
          ...(tls.serverName ? { servername: tls.serverName } : {}),
        }
      : undefined;
    const session = new Http2SessionManager(baseUrl, { pingIntervalMs: 30_000, idleConnectionTimeoutMs: 60_000 }, nodeOptions);
    this.sessions.set(baseUrl, session);
    const interceptors = [...(this.o.tracing === false ? [] : [tracingInterceptor]), ...(this.o.interceptors ?? [])];
    const transport =
      this.o.protocol === "connect"
        ? createConnectTransport({ baseUrl, httpVersion: "2", sessionManager: session, useBinaryFormat: !this.o.json, interceptors })
        : createGrpcTransport({ baseUrl, sessionManager: session, interceptors });
    this.transports.set(baseUrl, { transport, generation: this.generation });
    return transport;
  }

  /** Closes every HTTP/2 session (calls in flight fail) and stops watching the TLS files. */
  close(): void {
    this.stopWatching();
    for (const s of [...this.sessions.values(), ...this.retired]) s.abort();
    this.sessions.clear();
    this.retired.clear();
    this.transports.clear();
  }

  /** A session on the old certificate: calls in flight finish; it is closed after the grace. */
  private retire(baseUrl: string): void {
    const old = this.sessions.get(baseUrl);
    this.sessions.delete(baseUrl);
    this.transports.delete(baseUrl);
    if (!old) return;
    this.retired.add(old);
    setTimeout(() => {
      this.retired.delete(old);
      old.abort();
    }, RETIRED_SESSION_GRACE_MS).unref();
  }
}

/** Calls onChange when any of the files changes; a throwing onChange is retried on the next change. */
function watchFiles(files: TlsFiles, onChange: () => void): () => void {
  const paths = [files.certFile, files.keyFile, files.caFile].filter((f): f is string => !!f);
  const listener = (cur: { mtimeMs: number; ino: number; size: number }, prev: { mtimeMs: number; ino: number; size: number }) => {
    if (cur.mtimeMs === prev.mtimeMs && cur.ino === prev.ino && cur.size === prev.size) return;
    try {
      onChange();
    } catch {
      // Half-written or unreadable: the old material stays until the files change again.
    }
  };
  for (const f of paths) watchFile(f, { interval: files.reloadIntervalMs ?? 5000, persistent: false }, listener);
  return () => {
    for (const f of paths) unwatchFile(f, listener);
  };
}
