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
import { create, fromBinary, toBinary, type DescMessage, type DescMethodUnary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type Interceptor, type Transport, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { grpcFrame, webHeaders } from "./grpc-unary-server.js";
import { SEND_GATE } from "./send-gate.js";

export interface UnaryClientOptions {
  baseUrl: string;
  interceptors: Interceptor[];
  /** TLS options for http2.connect (client certificate, CA). */
  nodeOptions?: http2.SecureClientSessionOptions;
  /** PING on an idle-looking connection this often; no answer within it closes the session. */
  pingIntervalMs: number;
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

/** One HTTP/2 session to the server, opened on demand, replaced when it closes or goes away. */
class Session {
  private session: http2.ClientHttp2Session | undefined;
  private active = 0;
  private readonly origin: string;

  constructor(private readonly opts: UnaryClientOptions) {
    this.origin = new URL(opts.baseUrl).origin;
  }

  get(): http2.ClientHttp2Session {
    const current = this.session;
    if (current && !current.closed && !current.destroyed) return current;
    const s = http2.connect(this.origin, this.opts.nodeOptions ?? {});
    this.session = s;
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
    const ping = setInterval(() => {
      if (s.closed || s.destroyed) return clearInterval(ping);
      const sent = s.ping((err) => {
        if (err && !s.destroyed) s.destroy();
      });
      if (!sent && !s.destroyed) s.destroy();
    }, this.opts.pingIntervalMs);
    ping.unref();
    s.once("close", () => clearInterval(ping));
    // Idle, the session must not keep a process (the CLI, a test) alive.
    if (this.active === 0) s.unref();
    return s;
  }

  opened(s: http2.ClientHttp2Session): void {
    if (this.active++ === 0) s.ref();
  }

  closed(s: http2.ClientHttp2Session): void {
    if (--this.active === 0 && !s.destroyed) s.unref();
  }
}

/** The gRPC exchange of one unary call: request out, one message or a status back. */
function exchange(session: Session, opts: UnaryClientOptions, req: UnaryRequest, timeoutMs: number | undefined): Promise<UnaryResponse> {
  const method = req.method;
  const maxBytes = opts.readMaxBytes ?? 4 * 1024 * 1024;
  return new Promise<UnaryResponse>((resolve, reject) => {
    const signal = req.signal;
    if (signal.aborted) return reject(ConnectError.from(signal.reason, Code.Canceled));
    let s: http2.ClientHttp2Session;
    try {
      s = session.get();
    } catch (err) {
      return reject(nodeError(err));
    }
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
    // From here to stream.end() nothing awaits: the gate's answer is the last word before the write.
    const gate = req.contextValues.get(SEND_GATE);
    const refusal = gate?.beforeSend();
    if (refusal !== undefined) return reject(new ConnectError(refusal, Code.Aborted));
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.request(headers);
    } catch (err) {
      return reject(nodeError(err));
    }
    session.opened(s);
    let settled = false;
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
      if (rst !== undefined && !stream.destroyed) stream.close(rst);
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
      stream.end(grpcFrame(toBinary(method.input, req.message)), gate ? (err?: Error | null) => !err && gate.sent() : undefined);
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
