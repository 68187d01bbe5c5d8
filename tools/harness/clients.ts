/**
 * Every client the harness, the drills, the tests, the bench and the fuzzers make of a railfence
 * service: one function, chosen by service, protocol and identity. (The services' own clients of
 * each other are product code, services/shared/rpc/client-transport.ts; these are the outside
 * callers: an operator, a payouts client, a caller without a certificate, a fuzzer.)
 */
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { readFileSync } from "node:fs";
import { Pki, type IdentityFiles } from "./pki.js";

/** The two protocols the tests speak to a service's one port: binary gRPC, Connect JSON over HTTP/2. */
export type Protocol = "grpc" | "connect-json";
export const PROTOCOLS: readonly Protocol[] = ["grpc", "connect-json"];

/** What a client presents under TLS: an identity's certificate, or only a CA to trust (no certificate). */
export type ClientTls = IdentityFiles | { ca: string };

export interface ClientOptions {
  /** Default "grpc". */
  protocol?: Protocol;
  /** Omitted: cleartext h2c (http:// URLs). */
  tls?: ClientTls;
  /** Deadline of every call unless the call sets its own. */
  timeoutMs?: number;
  interceptors?: Interceptor[];
  /** Close the HTTP/2 connection after this long idle (so nothing warm outlives a test). */
  idleConnectionTimeoutMs?: number;
  /** HTTP/2 sessions the caller owns and closes; they then carry the TLS and idle settings
   * (ClientPool makes them so). */
  sessionManager?: Http2SessionManager;
}

/** createGrpcTransport / createConnectTransport nodeOptions for tls. */
export function tlsNodeOptions(tls: ClientTls): { ca: Buffer; cert?: Buffer; key?: Buffer } {
  return "cert" in tls ? Pki.nodeOptions(tls) : { ca: readFileSync(tls.ca) };
}

/** A client of service at baseUrl. */
export function connectClient<S extends DescService>(service: S, baseUrl: string, opts: ClientOptions = {}): Client<S> {
  const common = {
    baseUrl,
    ...(opts.tls ? { nodeOptions: tlsNodeOptions(opts.tls) } : {}),
    ...(opts.timeoutMs !== undefined ? { defaultTimeoutMs: opts.timeoutMs } : {}),
    ...(opts.interceptors ? { interceptors: opts.interceptors } : {}),
    ...(opts.idleConnectionTimeoutMs !== undefined ? { idleConnectionTimeoutMs: opts.idleConnectionTimeoutMs } : {}),
    ...(opts.sessionManager ? { sessionManager: opts.sessionManager } : {}),
  };
  const transport =
    (opts.protocol ?? "grpc") === "grpc" ? createGrpcTransport(common) : createConnectTransport({ ...common, httpVersion: "2", useBinaryFormat: false });
  return createClient(service, transport);
}

/**
 * Clients whose HTTP/2 sessions one owner closes at once (a test file's afterAll): each client
 * gets a session of its own, so clients share nothing with each other.
 */
export class ClientPool {
  private readonly managers: Http2SessionManager[] = [];

  /** defaults apply to every client of the pool (a call's own options win). */
  constructor(private readonly defaults: Omit<ClientOptions, "sessionManager" | "protocol"> = {}) {}

  /** A client of service at baseUrl over protocol. */
  client<S extends DescService>(
    service: S,
    baseUrl: string,
    protocol: Protocol = "grpc",
    opts: Omit<ClientOptions, "sessionManager" | "protocol"> = {},
  ): Client<S> {
    const o = { ...this.defaults, ...opts };
    // A session manager of our own takes the connection options (the transport's are then unused).
    const idle = o.idleConnectionTimeoutMs !== undefined ? { idleConnectionTimeoutMs: o.idleConnectionTimeoutMs } : undefined;
    const sessionManager = new Http2SessionManager(baseUrl, idle, o.tls ? tlsNodeOptions(o.tls) : undefined);
    this.managers.push(sessionManager);
    return connectClient(service, baseUrl, { ...o, protocol, sessionManager });
  }

  /** One client per protocol. */
  both<S extends DescService>(service: S, baseUrl: string): Record<Protocol, Client<S>> {
    return { grpc: this.client(service, baseUrl, "grpc"), "connect-json": this.client(service, baseUrl, "connect-json") };
  }

  /** Ends every session this pool opened. */
  close(): void {
    for (const m of this.managers.splice(0)) m.abort();
  }
}
