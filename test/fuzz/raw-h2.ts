/**
 * Raw HTTP/2 requests for what no well-behaved client sends: bad gRPC length prefixes,
 * garbage bodies and content types, oversized bodies, slow (slowloris) and stalled bodies, many
 * streams on one connection. Every request is bounded: a hang is reported as such, never waited
 * out. Nothing here knows which server stack answers: it reads the wire (status, gRPC trailers,
 * Connect error JSON or end-stream message) the way any client would.
 */
import http2 from "node:http2";
import { ConnectError } from "@connectrpc/connect";
import { endStreamFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { errorInfo } from "../../services/shared/domain/errors.js";

export interface RawAnswer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
  /** grpc-status from trailers (or a trailers-only response). */
  grpcStatus?: number;
  grpcMessage?: string;
  /** Connect unary error body ({code, message}). */
  connectCode?: string;
  connectMessage?: string;
  /** The stream was reset by the server (RST_STREAM code). */
  rstCode?: number;
  /** No answer within the bound. */
  hung?: boolean;
  /** Client-side stream or session error. */
  error?: string;
  /** Milliseconds from sending the request to the response headers. */
  answeredMs?: number;
  /** Milliseconds from sending the request to the stream's close (both sides done or reset). */
  closedMs?: number;
  /** The bound passed with the stream still open (whether or not an answer came). */
  stillOpen?: boolean;
  /** The error the answer carries, from whichever protocol it speaks; undefined for a success. */
  refusal?: ConnectError;
  /** ErrorInfo of the refusal: reason and metadata. */
  reason?: string;
  metadata?: Record<string, string>;
}

export interface RawRequest {
  path: string;
  headers?: http2.OutgoingHttpHeaders;
  /** The body (or, with keepOpen, what is sent before the client stalls). */
  body?: Uint8Array | string;
  boundMs?: number;
  /** Never end the request: the client stalls with its side of the stream open. */
  keepOpen?: boolean;
  /** With keepOpen: keep sending one byte of this every tickMs (a trickle that never finishes). */
  trickle?: { byte: number; tickMs: number };
}

/** A gRPC length-prefixed envelope; `declaredLength` lets a test lie about the size. */
export function grpcFrame(message: Uint8Array, opts: { flags?: number; declaredLength?: number } = {}): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(opts.flags ?? 0, 0);
  head.writeUInt32BE(opts.declaredLength ?? message.length, 1);
  return Buffer.concat([head, Buffer.from(message)]);
}

export const GRPC_HEADERS = { "content-type": "application/grpc", te: "trailers" } as const;
export const CONNECT_JSON_HEADERS = { "content-type": "application/json" } as const;

/**
 * Sends one request on session (or a fresh one to url) and collects the whole answer, waiting
 * for the stream to close (with keepOpen, only the server can close it).
 */
export function rawRequest(target: string | http2.ClientHttp2Session, req: RawRequest): Promise<RawAnswer> {
  const own = typeof target === "string";
  const session = own ? http2.connect(target) : target;
  if (own) session.on("error", () => {});
  return new Promise<RawAnswer>((resolve) => {
    const answer: RawAnswer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    const started = performance.now();
    let done = false;
    let tick: NodeJS.Timeout | undefined;
    const finish = (extra: Partial<RawAnswer> = {}) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearInterval(tick);
      Object.assign(answer, extra, { body: Buffer.concat(chunks) });
      readAnswer(answer);
      if (own) session.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      finish(answer.status === 0 ? { hung: true, stillOpen: true } : { stillOpen: true });
    }, req.boundMs ?? 10_000);
    const stream = session.request({ ":method": "POST", ":path": req.path, ...req.headers });
    stream.on("response", (h) => {
      answer.status = Number(h[":status"]);
      answer.headers = h;
      answer.answeredMs = performance.now() - started;
    });
    stream.on("trailers", (t) => (answer.trailers = t));
    stream.on("data", (d: Buffer) => chunks.push(d));
    stream.on("close", () => {
      const rst = stream.rstCode && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR ? { rstCode: stream.rstCode } : {};
      finish({ ...rst, closedMs: performance.now() - started });
    });
    stream.on("error", (e) => (answer.error = e.message));
    // node:http2 ends GET and HEAD requests with their headers; writing would fail.
    const method = req.headers?.[":method"];
    if (method === "GET" || method === "HEAD") return;
    const body = req.body ?? Buffer.alloc(0);
    if (!req.keepOpen) return void stream.end(body);
    stream.write(body);
    if (req.trickle) {
      const { byte, tickMs } = req.trickle;
      tick = setInterval(() => {
        if (!stream.closed && !stream.destroyed) stream.write(Buffer.from([byte]));
      }, tickMs);
    }
  });
}

/** Fills in the status fields and the refusal, whichever protocol the answer speaks. */
function readAnswer(answer: RawAnswer): void {
  const gs = answer.trailers["grpc-status"] ?? answer.headers["grpc-status"];
  if (gs !== undefined) answer.grpcStatus = Number(gs);
  const gm = answer.trailers["grpc-message"] ?? answer.headers["grpc-message"];
  if (gm !== undefined) answer.grpcMessage = safeDecode(String(gm));
  const ct = String(answer.headers["content-type"] ?? "");
  if (answer.status !== 200 && ct.startsWith("application/json")) {
    try {
      const e = JSON.parse(answer.body.toString("utf8")) as { code?: string; message?: string };
      answer.connectCode = e.code;
      answer.connectMessage = e.message;
    } catch {
      // not a Connect error body
    }
  }
  answer.refusal = refusalOf(answer, ct);
  const info = answer.refusal ? errorInfo(answer.refusal) : undefined;
  answer.reason = info?.reason;
  answer.metadata = info ? { ...info.metadata } : undefined;
}

const safeDecode = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

function webHeaders(h: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : String(v));
  return out;
}

/** The error an answer carries: gRPC(-Web) status + details, a Connect error body or end-stream. */
function refusalOf(a: RawAnswer, ct: string): ConnectError | undefined {
  const fallback = new ConnectError(`HTTP ${a.status}`);
  if (ct.startsWith("application/grpc")) {
    const trailers = webHeaders({ ...a.headers, ...a.trailers });
    for (const frame of envelopes(a.body)) {
      // gRPC-Web carries its trailers in a body frame flagged 0x80.
      if (frame.flags & 0x80)
        for (const line of Buffer.from(frame.data).toString("latin1").split("\r\n")) {
          const i = line.indexOf(":");
          if (i > 0) trailers.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
        }
    }
    return findTrailerError(trailers);
  }
  if (ct.startsWith("application/connect+")) {
    const end = envelopes(a.body).find((f) => f.flags & 0x02);
    return end ? endStreamFromJson(end.data).error : undefined;
  }
  if (a.status !== 200 && ct.startsWith("application/json")) {
    try {
      return errorFromJsonBytes(a.body, webHeaders(a.headers), fallback);
    } catch {
      return fallback;
    }
  }
  return undefined;
}

function envelopes(body: Buffer): { flags: number; data: Uint8Array }[] {
  const out: { flags: number; data: Uint8Array }[] = [];
  for (let p = 0; p + 5 <= body.length; ) {
    const len = body.readUInt32BE(p + 1);
    out.push({ flags: body[p]!, data: body.subarray(p + 5, p + 5 + len) });
    p += 5 + len;
  }
  return out;
}

/**
 * A slowloris client: opens a stream, sends headers and a length prefix within the size limit,
 * then one byte every intervalMs, never finishing. stop() cancels it; `answered` resolves if the
 * server answers or resets it first (its read deadline).
 */
export function slowStream(
  url: string,
  path: string,
  headers: http2.OutgoingHttpHeaders,
  intervalMs: number,
  declaredLength = 1000,
): { answered: Promise<RawAnswer>; stop(): void } {
  const session = http2.connect(url);
  session.on("error", () => {});
  const stream = session.request({ ":method": "POST", ":path": path, ...headers });
  const answer: RawAnswer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
  const chunks: Buffer[] = [];
  // A frame that promises declaredLength bytes and then trickles.
  stream.write(grpcFrame(new Uint8Array(0), { declaredLength }));
  const tick = setInterval(() => {
    if (!stream.closed && !stream.destroyed) stream.write(Buffer.from([0x0a]));
  }, intervalMs);
  const answered = new Promise<RawAnswer>((resolve) => {
    stream.on("response", (h) => {
      answer.status = Number(h[":status"]);
      answer.headers = h;
    });
    stream.on("trailers", (t) => (answer.trailers = t));
    stream.on("data", (d: Buffer) => chunks.push(d));
    const end = () => {
      clearInterval(tick);
      answer.body = Buffer.concat(chunks);
      const gs = answer.trailers["grpc-status"] ?? answer.headers["grpc-status"];
      if (gs !== undefined) answer.grpcStatus = Number(gs);
      if (stream.rstCode) answer.rstCode = stream.rstCode;
      resolve(answer);
    };
    stream.on("close", end);
    stream.on("error", () => {});
  });
  return {
    answered,
    stop() {
      clearInterval(tick);
      stream.close(http2.constants.NGHTTP2_CANCEL);
      session.destroy();
    },
  };
}
