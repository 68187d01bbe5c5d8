/**
 * Raw HTTP/2 requests for what no well-behaved client sends: bad gRPC length prefixes,
 * garbage bodies and content types, oversized bodies, slow (slowloris) bodies, many streams on
 * one connection. Every request is bounded: a hang is reported as such, never waited out.
 */
import http2 from "node:http2";

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
}

export interface RawRequest {
  path: string;
  headers?: http2.OutgoingHttpHeaders;
  /** Body chunks; written in order. */
  body?: Buffer | string;
  boundMs?: number;
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

/** Sends one request on session (or a fresh one to url) and collects the whole answer. */
export function rawRequest(target: string | http2.ClientHttp2Session, req: RawRequest): Promise<RawAnswer> {
  const own = typeof target === "string";
  const session = own ? http2.connect(target) : target;
  if (own) session.on("error", () => {});
  return new Promise<RawAnswer>((resolve) => {
    const answer: RawAnswer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (extra: Partial<RawAnswer> = {}) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      Object.assign(answer, extra, { body: Buffer.concat(chunks) });
      const gs = answer.trailers["grpc-status"] ?? answer.headers["grpc-status"];
      if (gs !== undefined) answer.grpcStatus = Number(gs);
      const gm = answer.trailers["grpc-message"] ?? answer.headers["grpc-message"];
      if (gm !== undefined) answer.grpcMessage = decodeURIComponent(String(gm));
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
      if (own) session.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      finish({ hung: true });
    }, req.boundMs ?? 10_000);
    const stream = session.request({ ":method": "POST", ":path": req.path, ...req.headers });
    stream.on("response", (h) => {
      answer.status = Number(h[":status"]);
      answer.headers = h;
    });
    stream.on("trailers", (t) => (answer.trailers = t));
    stream.on("data", (d: Buffer) => chunks.push(d));
    stream.on("end", () => finish());
    stream.on("close", () => finish(stream.rstCode && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR ? { rstCode: stream.rstCode } : {}));
    stream.on("error", (e) => finish({ error: e.message }));
    stream.end(req.body ?? Buffer.alloc(0));
  });
}

/**
 * A slowloris client: opens a stream, sends headers and then one byte every intervalMs, never
 * finishing. stop() cancels it; `answered` resolves if the server answers or resets it first.
 */
export function slowStream(url: string, path: string, headers: http2.OutgoingHttpHeaders, intervalMs: number): { answered: Promise<RawAnswer>; stop(): void } {
  const session = http2.connect(url);
  session.on("error", () => {});
  const stream = session.request({ ":method": "POST", ":path": path, ...headers });
  const answer: RawAnswer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
  const chunks: Buffer[] = [];
  // A frame that promises 1 MiB and then trickles.
  stream.write(grpcFrame(new Uint8Array(0), { declaredLength: 1 << 20 }));
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
