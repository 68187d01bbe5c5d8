/**
 * A Connect `Transport` whose unary calls are plain gRPC over one kept-warm HTTP/2 session,
 * without connect-node's per-call pipeline (the client half of grpc-unary-server.ts; decision
 * 006). Interceptors run as on any Connect transport, so tracing and the credential header are
 * unchanged; streaming calls go through connect-node's own gRPC transport.
 *
 * One attempt per call, never a retry (a SubmitPayout retried is a second payment). Every failure
 * becomes a ConnectError the way connect-node's transport makes it: a status the server sent
 * (grpc-status, with grpc-status-details-bin read by connect's own decoder), an HTTP status mapped
 * as gRPC specifies, or a transport failure (reset, refused connection, deadline, cancellation).
 * The codes that mean "the server refused before acting" (invalid_argument, unauthenticated,
 * permission_denied) come only from a status the server sent, never from a broken connection.
 */
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { create, fromBinary, toBinary, type DescMessage, type DescMethodUnary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type Interceptor, type Transport, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { grpcFrame, webHeaders } from "./grpc-wire.js";
import { SEND_GATE } from "./send-gate.js";

export interface UnaryClientOptions {
  baseUrl: string;
  interceptors: Interceptor[];
  /** TLS options for http2.connect (client certificate, CA). */
  nodeOptions?: http2.SecureClientSessionOptions;
  /** PING the connection this often; a PING still unanswered at the next one resets the connection. */
  pingIntervalMs: number;
  /**
   * Longest wait for a new connection (TCP, and TLS where used) before a call that carries a send
   * gate (a rail submission) gives up with nothing sent. Other calls wait up to 10 s, within their
   * own deadline. No request is ever queued on a connection still being made.
   */
  connectTimeoutMs?: number;
  /**
   * Harness negative control only (rail-proxy's "connected-session" guard removed): the transport
   * as it was before that guard, a request queued on a session still connecting and a cancelled
   * stream closed rather than its connection reset.
   */
  unguardedSend?: boolean;
  /** Open the connection when the transport is made, not on the first call (which then does not wait for it). */
  connectAtStart?: boolean;
  /** A session with no call for this long is closed (a new one opens on the next call). */
  idleConnectionTimeoutMs: number;
  /** Largest answer accepted (bytes). */
  readMaxBytes?: number;
}

const NEVER = new AbortController().signal;
const H2 = http2.constants;

/** What a gRPC response's body holds: exactly one uncompressed message, or a ConnectError. */
export function parseUnaryBody(body: Uint8Array, maxBytes: number): Uint8Array | ConnectError | undefined {
  if (body.byteLength === 0) return undefined;
  if (body.byteLength < 5) return new ConnectError("protocol error: incomplete envelope", Code.Internal);
  const flags = body[0]!;
  const length = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(1);
  if (length > maxBytes) return new ConnectError(`message larger than ${maxBytes} bytes`, Code.ResourceExhausted);
  if (flags !== 0) {
    // railfence's clients never offer compression, so a compressed answer is a protocol error.
    return new ConnectError(`protocol error: unexpected envelope flags ${flags}`, Code.Internal);
  }
  if (body.byteLength !== 5 + length) {
    return new ConnectError(
      body.byteLength < 5 + length ? "protocol error: incomplete envelope" : "protocol error: more than one message for a unary method",
      Code.Internal,
    );
  }
  return body.subarray(5);
}

function h2ResetError(rstCode: number): ConnectError {
  const code =
    rstCode === H2.NGHTTP2_REFUSED_STREAM
      ? Code.Unavailable
      : rstCode === H2.NGHTTP2_CANCEL
        ? Code.Canceled
        : rstCode === H2.NGHTTP2_ENHANCE_YOUR_CALM
          ? Code.ResourceExhausted
          : rstCode === H2.NGHTTP2_INADEQUATE_SECURITY
            ? Code.PermissionDenied
            : Code.Internal;
  return new ConnectError(`http/2 stream closed with error code 0x${rstCode.toString(16)}`, code);
}

/**
 * A node error on the connection, mapped as connect-node maps it (the whole cause chain is read:
 * a refused connection arrives as ERR_HTTP2_STREAM_CANCEL caused by ECONNREFUSED): unreachable is
 * unavailable, a reset is aborted, anything else internal.
 */
function nodeError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const codes: unknown[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = (e as { cause?: unknown }).cause, depth++)
    codes.push((e as { code?: unknown }).code);
  const any = (...names: string[]) => codes.some((c) => names.includes(c as string));
  const code = any("ECONNREFUSED", "ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN")
    ? Code.Unavailable
    : any("ECONNRESET", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ERR_HTTP2_GOAWAY_SESSION")
      ? Code.Aborted
      : Code.Internal;
  const ce = ConnectError.from(err, code);
  if (ce !== err) ce.cause = err;
  return ce;
}

/** The TCP socket under each session: the only handle that can abort a connect or reset a connection. */
const tcpOf = new WeakMap<http2.ClientHttp2Session, net.Socket>();

/**
 * Ends a connection at once, discarding what it has not sent. Still connecting: the TCP socket
 * is closed (no SYN is retransmitted, the connection is never made; destroying only the HTTP/2
 * session would leave the socket connecting, and Node would complete it). Connected: an RST
 * (SO_LINGER 0), so neither Node's buffers nor the kernel's send queue can deliver a request
 * later; a plain close would let the kernel go on sending what it holds.
 */
export function resetSession(s: http2.ClientHttp2Session): void {
  const tcp = tcpOf.get(s);
  if (tcp && !tcp.destroyed) {
    if (tcp.connecting) tcp.destroy();
    else tcp.resetAndDestroy();
  }
  if (!s.destroyed) s.destroy();
}

/** The session's transport, made here so that its TCP socket can be reset (TLS on top where used). */
function openSocket(url: URL, tlsOptions: tls.ConnectionOptions | undefined): { tcp: net.Socket; transport: net.Socket | tls.TLSSocket } {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const tcp = net.connect({ host, port });
  if (url.protocol !== "https:") return { tcp, transport: tcp };
  const transport = tls.connect({
    ...tlsOptions,
    socket: tcp,
    ALPNProtocols: ["h2"],
    ...(net.isIP(host) ? {} : { servername: host }),
  });
  return { tcp, transport };
}

/** One HTTP/2 session to the server, opened on demand, replaced when it closes or goes away. */
class Session {
  private session: http2.ClientHttp2Session | undefined;
  /** Settles when the current session has connected (or failed to). */
  private connecting: Promise<void> | undefined;
  private active = 0;
  private readonly origin: string;

  constructor(private readonly opts: UnaryClientOptions) {
    this.origin = new URL(opts.baseUrl).origin;
  }

  get(): http2.ClientHttp2Session {
    const current = this.session;
    if (current && !current.closed && !current.destroyed) return current;
    let tcp: net.Socket | undefined;
    const s = http2.connect(this.origin, {
      ...this.opts.nodeOptions,
      createConnection: (url: URL) => {
        const opened = openSocket(url, this.opts.nodeOptions);
        tcp = opened.tcp;
        return opened.transport;
      },
    });
    if (tcp) tcpOf.set(s, tcp);
    this.session = s;
    this.connecting = new Promise<void>((resolve, reject) => {
      const onConnect = () => {
        s.off("close", onClose);
        resolve();
      };
      const onClose = () => {
        s.off("connect", onConnect);
        reject(new ConnectError("the connection closed before it was established; nothing was sent", Code.Unavailable));
      };
      s.once("connect", onConnect);
      s.once("close", onClose);
    });
    this.connecting.catch(() => {});
    const drop = () => {
      if (this.session === s) this.session = undefined;
    };
    // Errors surface on the calls' streams; the session itself is just replaced.
    s.on("error", drop);
    s.once("close", drop);
    s.once("goaway", drop);
    s.setTimeout(this.opts.idleConnectionTimeoutMs, () => {
      if (this.active === 0) s.close();
    });
    // A connection that answers no PING within an interval is reset: whatever it still holds
    // (a request the kernel could not deliver) is discarded, never sent later than that.
    let unanswered = false;
    const ping = setInterval(() => {
      if (s.closed || s.destroyed) return clearInterval(ping);
      if (s.connecting) return;
      // Decided after this turn's I/O (setImmediate runs after the poll phase): a process just
      // resumed from a pause (GC, SIGSTOP, a VM) reads the answer that arrived meanwhile first.
      if (unanswered) return void setImmediate(() => unanswered && resetSession(s));
      unanswered = true;
      const sent = s.ping((err) => {
        unanswered = false;
        if (err && !s.destroyed) resetSession(s);
      });
      if (!sent) resetSession(s);
    }, this.opts.pingIntervalMs);
    ping.unref();
    s.once("close", () => clearInterval(ping));
    // Idle, the session must not keep a process (the CLI, a test) alive.
    if (this.active === 0) s.unref();
    return s;
  }

  /**
   * The session once connected. A request is never queued on a session still connecting: Node
   * would write it whenever the connection completes, however long after the caller gave up.
   * Past `timeoutMs` the connection attempt is reset and the call fails with nothing sent.
   */
  // [rule:rail-lag-connect]
  connected(timeoutMs: number): http2.ClientHttp2Session | Promise<http2.ClientHttp2Session> {
    const s = this.get();
    if (!s.connecting) return s;
    const pending = this.connecting!;
    if (this.active === 0) s.ref();
    return new Promise<http2.ClientHttp2Session>((resolve, reject) => {
      const timer = setTimeout(() => {
        resetSession(s);
        reject(new ConnectError(`the connection was not established within ${timeoutMs} ms; nothing was sent`, Code.Unavailable));
      }, timeoutMs);
      pending.then(
        () => {
          clearTimeout(timer);
          resolve(s);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    }).finally(() => {
      if (this.active === 0 && !s.destroyed) s.unref();
    });
  }
  // [/rule:rail-lag-connect]

  opened(s: http2.ClientHttp2Session): void {
    if (this.active++ === 0) s.ref();
  }

  closed(s: http2.ClientHttp2Session): void {
    if (--this.active === 0 && !s.destroyed) s.unref();
  }
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The gRPC exchange of one unary call: a connected session first (nothing is written before),
 * then the request out, one message or a status back.
 */
async function exchange(session: Session, opts: UnaryClientOptions, req: UnaryRequest, timeoutMs: number | undefined): Promise<UnaryResponse> {
  const gate = req.contextValues.get(SEND_GATE);
  if (req.signal.aborted) throw ConnectError.from(req.signal.reason, Code.Canceled);
  const started = performance.now();
  const connectLimitMs = Math.min(
    gate ? (opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) : DEFAULT_CONNECT_TIMEOUT_MS,
    timeoutMs ?? Number.POSITIVE_INFINITY,
  );
  let s: http2.ClientHttp2Session;
  try {
    // [rule:connected-session]
    const ready = opts.unguardedSend ? session.get() : session.connected(connectLimitMs);
    s = ready instanceof Promise ? await ready : ready;
  } catch (err) {
    // No stream was opened: not a byte of the request was written, and the attempt is reset.
    const ce = nodeError(err);
    gate?.unsent?.(ce.rawMessage);
    throw notSent(
      timeoutMs !== undefined && performance.now() - started >= timeoutMs
        ? new ConnectError(`the operation timed out before the connection was established; nothing was sent`, Code.DeadlineExceeded, undefined, undefined, err)
        : ce,
    );
  }
  const remainingMs = timeoutMs === undefined ? undefined : timeoutMs - (performance.now() - started);
  if (req.signal.aborted || (remainingMs !== undefined && remainingMs <= 0)) {
    gate?.unsent?.("the call ended while the connection was being established");
    throw notSent(
      req.signal.aborted
        ? ConnectError.from(req.signal.reason, Code.Canceled)
        : new ConnectError("the operation timed out before the connection was established; nothing was sent", Code.DeadlineExceeded),
    );
  }
  return send(session, s, opts, req, remainingMs);
}

/** One request on a connected session. */
function send(
  session: Session,
  s: http2.ClientHttp2Session,
  opts: UnaryClientOptions,
  req: UnaryRequest,
  timeoutMs: number | undefined,
): Promise<UnaryResponse> {
  const method = req.method;
  const maxBytes = opts.readMaxBytes ?? 4 * 1024 * 1024;
  return new Promise<UnaryResponse>((resolve, reject) => {
    const signal = req.signal;
    const headers: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": `/${method.parent.typeName}/${method.name}`,
      "content-type": "application/grpc+proto",
      te: "trailers",
      "user-agent": "railfence-grpc",
    };
    req.header.forEach((v, k) => {
      headers[k] = v;
    });
    if (timeoutMs !== undefined) headers["grpc-timeout"] = `${Math.max(1, Math.ceil(timeoutMs))}m`;
    // From here to stream.end() nothing awaits: the gate's answer is the last word before the write,
    // and the session is connected, so the request is written now, not whenever it connects.
    const gate = req.contextValues.get(SEND_GATE);
    const refusal = gate?.beforeSend();
    if (refusal !== undefined) return reject(new ConnectError(refusal, Code.Aborted));
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.request(headers);
    } catch (err) {
      // The session closed since it connected: no stream, nothing written.
      const ce = nodeError(err);
      gate?.unsent?.(ce.rawMessage);
      return reject(ce);
    }
    session.opened(s);
    let settled = false;
    /** The whole request was handed to the socket (end()'s callback ran). */
    let written = false;
    let status = 0;
    let responseHeader: Headers | undefined;
    let trailer: Headers | undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => fail(ConnectError.from(signal.reason, Code.Canceled), H2.NGHTTP2_CANCEL);
    const cleanup = () => {
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      session.closed(s);
    };
    function fail(err: ConnectError, rst?: number) {
      if (settled) return;
      cleanup();
      if (rst !== undefined && !written && !opts.unguardedSend) {
        // Given up (deadline, cancel) before the request was handed to the socket: a closed
        // stream would still let Node flush what it buffered. Reset the connection instead, so
        // that nothing of it leaves later (the other calls on it fail as a lost connection).
        resetSession(s);
      } else if (rst !== undefined && !stream.destroyed) stream.close(rst);
      reject(err);
    }
    if (timeoutMs !== undefined)
      timer = setTimeout(() => fail(new ConnectError("the operation timed out", Code.DeadlineExceeded), H2.NGHTTP2_CANCEL), timeoutMs);
    if (signal !== NEVER) signal.addEventListener("abort", onAbort, { once: true });

    stream.on("response", (h) => {
      status = Number(h[":status"]);
      responseHeader = webHeaders(h);
    });
    stream.on("data", (chunk: Buffer) => {
      received += chunk.byteLength;
      if (received > maxBytes + 5) return fail(new ConnectError(`message larger than ${maxBytes} bytes`, Code.ResourceExhausted), H2.NGHTTP2_CANCEL);
      chunks.push(chunk);
    });
    stream.on("trailers", (t) => {
      trailer = webHeaders(t);
    });
    stream.on("error", (err) => fail(nodeError(err)));
    stream.on("close", () => {
      if (settled) return;
      if (responseHeader === undefined) {
        // Reset or cut before any answer: the server may or may not have acted.
        return fail(
          stream.rstCode && stream.rstCode !== H2.NGHTTP2_NO_ERROR
            ? h2ResetError(stream.rstCode)
            : new ConnectError("the connection closed before an answer", Code.Unavailable),
        );
      }
      if (status !== 200) return fail(findTrailerError(responseHeader) ?? new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status)));
      if (!/^application\/grpc(\+proto)?$/i.test(responseHeader.get("content-type") ?? "")) {
        return fail(new ConnectError(`unexpected content type ${responseHeader.get("content-type") ?? "(none)"}`, Code.Unknown));
      }
      // Trailers-only (the status in the headers) or headers, message, trailers.
      const statusFrom = trailer ?? responseHeader;
      const err = findTrailerError(statusFrom);
      if (err) {
        // As connect-node's transport: the error carries the response's headers and trailers.
        for (const [k, v] of responseHeader) err.metadata.append(k, v);
        for (const [k, v] of trailer ?? []) err.metadata.append(k, v);
        return fail(err);
      }
      if (!statusFrom.has("grpc-status")) {
        return fail(
          stream.rstCode && stream.rstCode !== H2.NGHTTP2_NO_ERROR
            ? h2ResetError(stream.rstCode)
            : new ConnectError("protocol error: missing status", Code.Internal),
        );
      }
      const body = parseUnaryBody(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), maxBytes);
      if (body === undefined) return fail(new ConnectError("protocol error: missing output message for unary method", Code.Unimplemented));
      if (body instanceof ConnectError) return fail(body);
      let message: unknown;
      try {
        message = fromBinary(method.output, body);
      } catch (e) {
        return fail(new ConnectError("protocol error: the answer does not decode", Code.Internal, undefined, undefined, e));
      }
      cleanup();
      resolve({
        stream: false,
        service: method.parent,
        method,
        header: responseHeader,
        trailer: trailer ?? new Headers(),
        message,
      } as UnaryResponse);
    });
    try {
      // end()'s callback runs once the request's last bytes were written to the socket.
      stream.end(grpcFrame(toBinary(method.input, req.message)), (err?: Error | null) => {
        if (err) return;
        written = true;
        gate?.sent();
      });
    } catch (err) {
      fail(new ConnectError("the request does not encode", Code.Internal, undefined, undefined, err), H2.NGHTTP2_CANCEL);
    }
  });
}

/**
 * A Transport: unary calls through the direct path above, streams through `streams` (connect-node's
 * gRPC transport, configured alike).
 */
export function createUnaryGrpcTransport(opts: UnaryClientOptions, streams: Transport): Transport {
  const session = new Session(opts);
  // An unreachable server at start is no error: the session is dropped and the first call retries.
  if (opts.connectAtStart) session.get();
  const base = opts.baseUrl.replace(/\/+$/, "");
  return {
    unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      contextValues?: Parameters<Transport["unary"]>[5],
    ): Promise<UnaryResponse<I, O>> {
      let next = ((req: UnaryRequest) => exchange(session, opts, req, timeoutMs)) as (req: UnaryRequest) => Promise<UnaryResponse>;
      for (let i = opts.interceptors.length - 1; i >= 0; i--) next = opts.interceptors[i]!(next as never) as typeof next;
      const request = {
        stream: false,
        service: method.parent,
        method,
        requestMethod: "POST",
        url: `${base}/${method.parent.typeName}/${method.name}`,
        signal: signal ?? NEVER,
        header: new Headers(header),
        contextValues: contextValues ?? createContextValues(),
        message: create(method.input, input),
      } as unknown as UnaryRequest;
      return next(request) as Promise<UnaryResponse<I, O>>;
    },
    stream: streams.stream.bind(streams),
  };
}

const NOT_SENT = new WeakSet<object>();

function notSent<E extends object>(e: E): E {
  NOT_SENT.add(e);
  return e;
}

/**
 * True when the call failed before any byte of its request was written: no stream was ever
 * opened (the connection was refused, closed or not made in time). A caller may read "not found"
 * after such a failure as "never received" (executor/pay-one.ts, decision 023).
 */
export function provedNotSent(err: unknown): boolean {
  return typeof err === "object" && err !== null && NOT_SENT.has(err);
}
