/**
 * Connect clients for the CLI, over the gRPC protocol (the services' primary protocol).
 *
 * The payouts API and the rail-proxy reads go through the railfence client library
 * (clients/typescript): the same retry rules every service gets (transient failures only,
 * backoff with jitter, the server's retry hint, a budget and the --timeout-ms deadline). The
 * calls the library does not wrap (ResolveSubmission, the lock service) are sent once.
 *
 * The CLI owns its HTTP/2 sessions (one per base URL) and closes them when the command ends,
 * so a short-lived process never lingers on an idle connection. Calls to the rail-proxy go to
 * the first replica that answers: moving on to the next replica happens only when a replica
 * could not be reached at all (no railfence ErrorInfo), never after a server answered, so no
 * call is ever sent twice after it may have been processed.
 */
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { errorInfo } from "../shared/domain/errors.js";
import { createRailfenceClient, RailfenceError, type RailfenceClient } from "../../clients/typescript/src/index.js";

/** A failed call and the endpoint it went to (for the error report). */
export class CallFailed extends Error {
  /** Facts a command adds for the operator's next step (e.g. the Idempotency-Key to retry with). */
  readonly context: Record<string, string> = {};
  /**
   * Set by a command whose call changes something (`payouts create`): a failure without an
   * answer is then an unknown outcome (exit 6), not "retry later" as for a read.
   */
  hasEffect = false;

  constructor(
    readonly error: ConnectError,
    readonly endpoint: string,
  ) {
    super(error.message, { cause: error });
    this.name = "CallFailed";
  }
}

/**
 * Every call the CLI makes carries a fresh x-request-id: the server echoes it and logs it on each
 * line of the call, so an operator can quote it (the error report prints it) and grep for it.
 */
const mintRequestId: Interceptor = (next) => (req) => {
  if (!req.header.has("x-request-id")) req.header.set("x-request-id", `cli-${randomUUID()}`);
  return next(req);
};

/** Transport failures carry no railfence ErrorInfo: the request never reached a handler. */
export function isUnreachable(err: ConnectError): boolean {
  return err.code === Code.Unavailable && !errorInfo(err);
}

/** Opens clients on demand and closes every session at the end of the command. */
export class Connections {
  private readonly sessions = new Map<string, Http2SessionManager>();
  /** Library clients by endpoint set (a command usually needs one). */
  private readonly libraries = new Map<string, RailfenceClient>();

  /** tls: the operator's certificate/key and the CA (mutual TLS, https:// endpoints). */
  constructor(
    private readonly timeoutMs: number,
    private readonly tls?: { cert: Buffer; key: Buffer; ca?: Buffer },
  ) {}

  client<S extends DescService>(service: S, baseUrl: string): Client<S> {
    let session = this.sessions.get(baseUrl);
    if (!session) {
      session = new Http2SessionManager(baseUrl, undefined, this.tls);
      this.sessions.set(baseUrl, session);
    }
    return createClient(service, createGrpcTransport({ baseUrl, sessionManager: session, defaultTimeoutMs: this.timeoutMs, interceptors: [mintRequestId] }));
  }

  /** Runs one call against baseUrl; a failure becomes CallFailed naming the endpoint. */
  async call<S extends DescService, T>(service: S, baseUrl: string, fn: (client: Client<S>) => Promise<T>): Promise<T> {
    try {
      return await fn(this.client(service, baseUrl));
    } catch (err) {
      throw new CallFailed(ConnectError.from(err), baseUrl);
    }
  }

  /** Tries each URL in order while it is unreachable; the first answer (or refusal) wins. */
  async callAny<S extends DescService, T>(service: S, baseUrls: readonly string[], fn: (client: Client<S>) => Promise<T>): Promise<T> {
    let last: CallFailed | undefined;
    for (const url of baseUrls) {
      try {
        return await this.call(service, url, fn);
      } catch (err) {
        if (!(err instanceof CallFailed) || !isUnreachable(err.error)) throw err;
        last = err;
      }
    }
    throw last ?? new CallFailed(new ConnectError("no endpoint configured", Code.Unavailable), "(none)");
  }

  /**
   * Runs fn with the railfence client library for these endpoints; a failure becomes CallFailed
   * naming the endpoint of the last attempt.
   */
  async withLibrary<T>(endpoints: { payouts?: string; railProxy?: readonly string[] }, fn: (rf: RailfenceClient) => Promise<T>): Promise<T> {
    const id = JSON.stringify([endpoints.payouts ?? "", endpoints.railProxy ?? []]);
    let library = this.libraries.get(id);
    if (!library) {
      library = createRailfenceClient({
        ...(endpoints.payouts ? { payoutsUrl: endpoints.payouts } : {}),
        railProxyUrls: endpoints.railProxy ?? [],
        deadlineMs: this.timeoutMs,
        timeoutMs: this.timeoutMs,
        interceptors: [mintRequestId],
        ...(this.tls ? { tls: this.tls } : {}),
      });
      this.libraries.set(id, library);
    }
    try {
      return await fn(library);
    } catch (err) {
      if (err instanceof RailfenceError) throw new CallFailed(err.connectError, err.endpoint ?? endpoints.payouts ?? endpoints.railProxy?.[0] ?? "(none)");
      throw err;
    }
  }

  close(): void {
    for (const s of this.sessions.values()) s.abort();
    this.sessions.clear();
    for (const l of this.libraries.values()) l.close();
    this.libraries.clear();
  }
}
