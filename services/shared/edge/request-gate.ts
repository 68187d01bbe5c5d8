/**
 * What every request must pass before a handler framework sees it, written against plain
 * node:stream and HTTP/2 headers so any server stack can use it:
 *
 * 1. a protocol railfence serves (content type + method) and well-formed deadline and encoding
 *    headers;
 * 2. a body that arrives completely within its read deadline: the client's deadline when it is
 *    shorter, otherwise the server's read timeout (READ_TIMEOUT_MS, at most 10 s). A stalled or
 *    trickling body no longer holds a stream until the idle bound;
 * 3. no more than the server's request size limit, refused at the first bytes that prove it;
 * 4. exactly one message that decodes strictly (request-decode.ts).
 *
 * Every refusal is a ConnectError with an ErrorInfo reason from the catalogue (reasons.ts, area
 * "gate"); the caller writes it with refusal.ts and resets the stream, so a client still sending
 * is not left waiting.
 */
import type { IncomingHttpHeaders } from "node:http2";
import type { Readable } from "node:stream";
import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { railError, REASONS, toConnectError } from "../domain/errors.js";
import { BodyCollector, encodeEnvelope, type BodyProblem } from "./request-body.js";
import { decodeRequest, malformedRequest } from "./request-decode.js";
import { ACCEPTED_ENCODINGS, decompressMessage, encodingSupported } from "./request-decompress.js";
import { parseClientTimeout, requestProtocol, type RequestProtocol } from "../rpc/wire-protocol.js";

export interface GateLimits {
  /** Largest request message (bytes, after decompression). */
  maxMessageBytes: number;
  /** Longest wait for a complete body when the client's deadline is longer or absent. */
  readTimeoutMs: number;
  /** Longest deadline a client may ask for. */
  maxTimeoutMs: number;
}

export interface AdmittedRequest {
  protocol: RequestProtocol;
  /** What to hand on: one uncompressed envelope, or a Connect unary body (decompressed). */
  body: Uint8Array;
  /** Time left of the client's deadline when it set one (the framework further in enforces it). */
  remainingMs?: number;
  /** The request, decoded (strictly) once here: a server path that needs no framework uses it as is. */
  message: unknown;
}

export interface Refusal {
  error: ConnectError;
  /** Absent when the request speaks no protocol railfence serves. */
  protocol?: RequestProtocol;
  /** The HTTP status to answer with when it is not the code's usual one (404, 405, 415). */
  httpStatus?: number;
}

export type GateOutcome = { admitted: AdmittedRequest } | { refused: Refusal } | { gone: true };

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** A refusal for a path no service here implements, in the protocol the request seems to speak. */
export function methodNotFound(headers: IncomingHttpHeaders): Refusal {
  const protocol = requestProtocol(one(headers[":method"]), one(headers["content-type"]), false);
  const error = railError(REASONS.METHOD_NOT_FOUND, "no such method on this server");
  return { error, protocol, httpStatus: protocol?.name === "grpc" || protocol?.name === "grpc-web" ? undefined : 404 };
}

/**
 * Checks a request of `method` and reads its body from `body` (an HTTP/2 stream or a request
 * wrapping one). Resolves once the outcome is certain; `gone` when the client went away first.
 */
export async function admitRequest(body: Readable, headers: IncomingHttpHeaders, method: DescMethod, limits: GateLimits): Promise<GateOutcome> {
  const started = performance.now();
  const httpMethod = one(headers[":method"]);
  const protocol = requestProtocol(httpMethod, one(headers["content-type"]), method.methodKind === "server_streaming");
  if (!protocol) {
    if (httpMethod !== "POST") return { refused: { error: railError(REASONS.METHOD_NOT_ALLOWED, "only POST is served", {}), httpStatus: 405 } };
    const error = railError(REASONS.UNSUPPORTED_CONTENT_TYPE, "unsupported content type (gRPC, gRPC-Web or Connect, protobuf or JSON)", {
      field: "content-type",
    });
    return { refused: { error, httpStatus: 415 } };
  }
  const refuse = (error: ConnectError): GateOutcome => ({ refused: { error, protocol } });

  const timeout = parseClientTimeout(protocol.timeoutHeader, one(headers[protocol.timeoutHeader]), limits.maxTimeoutMs);
  if (timeout.kind === "malformed") return refuse(toConnectError(malformedRequest("invalid_timeout", protocol.timeoutHeader)));
  if (timeout.kind === "too_long") {
    return refuse(
      railError(REASONS.TIMEOUT_TOO_LONG, `${protocol.timeoutHeader} must be at most ${limits.maxTimeoutMs} ms`, { field: protocol.timeoutHeader }),
    );
  }
  const encoding = one(headers[protocol.encodingHeader]);
  if (!encodingSupported(encoding)) {
    const error = railError(REASONS.COMPRESSION_UNSUPPORTED, `request encoding not supported (${ACCEPTED_ENCODINGS.join(", ")})`, {
      field: protocol.encodingHeader,
    });
    error.metadata.set(
      protocol.name === "connect" ? "accept-encoding" : protocol.name === "connect-stream" ? "connect-accept-encoding" : "grpc-accept-encoding",
      ACCEPTED_ENCODINGS.join(","),
    );
    return refuse(error);
  }

  const clientMs = timeout.kind === "ms" ? timeout.ms : undefined;
  const clientFirst = clientMs !== undefined && clientMs <= limits.readTimeoutMs;
  const readMs = clientFirst ? clientMs : limits.readTimeoutMs;
  const contentLength = protocol.enveloped ? undefined : Number(one(headers["content-length"]) ?? Number.NaN);
  const collector = new BodyCollector(protocol.enveloped, limits.maxMessageBytes, Number.isFinite(contentLength) ? contentLength : undefined);
  const read = await readBody(body, collector, readMs);
  if (read === "gone") return { gone: true };
  if (read === "timeout") {
    return refuse(
      railError(REASONS.REQUEST_READ_TIMEOUT, `the request body did not arrive within ${readMs} ms`, {
        bound: clientFirst ? "client_deadline" : "server_read_timeout",
        timeout_ms: String(readMs),
      }),
    );
  }
  const complete = read === "complete" ? collector.finish() : read;
  if ("kind" in complete) return refuse(problemError(complete, limits));
  const message = decompressMessage(complete.payload, complete.compressed, encoding, limits.maxMessageBytes);
  if ("kind" in message) return refuse(problemError(message, limits));

  let decoded: unknown;
  try {
    decoded = decodeRequest(method.input, message, protocol.binary);
  } catch (err) {
    return refuse(toConnectError(err));
  }
  const remainingMs = clientMs === undefined ? undefined : clientMs - (performance.now() - started);
  if (remainingMs !== undefined && remainingMs <= 0) {
    return refuse(
      railError(REASONS.REQUEST_READ_TIMEOUT, "the deadline passed while the request body arrived", { bound: "client_deadline", timeout_ms: String(clientMs) }),
    );
  }
  // An uncompressed body goes on as received; a compressed one as its decompressed message.
  const onward = !complete.compressed ? complete.body : protocol.enveloped ? encodeEnvelope(message) : message;
  return { admitted: { protocol, body: onward, remainingMs, message: decoded } };
}

function problemError(p: BodyProblem, limits: GateLimits): ConnectError {
  if (p.kind === "too_large") {
    return railError(REASONS.REQUEST_TOO_LARGE, `request message larger than ${limits.maxMessageBytes} bytes`, { limit_bytes: String(limits.maxMessageBytes) });
  }
  return toConnectError(malformedRequest(p.problem));
}

/**
 * Feeds body chunks to the collector until the body is complete, a problem is certain, the
 * deadline passes, or the client leaves. Stops reading (pauses) in every case but completion.
 */
function readBody(body: Readable, collector: BodyCollector, deadlineMs: number): Promise<"complete" | "timeout" | "gone" | BodyProblem> {
  if (collector.early) return Promise.resolve(collector.early);
  if (body.readableEnded) return Promise.resolve("complete");
  return new Promise((resolve) => {
    const done = (r: "complete" | "timeout" | "gone" | BodyProblem) => {
      clearTimeout(timer);
      body.off("data", onData).off("end", onEnd).off("close", onGone).off("error", onGone);
      if (r !== "complete") body.pause();
      resolve(r);
    };
    const onData = (chunk: Uint8Array) => {
      const problem = collector.push(chunk);
      if (problem) done(problem);
    };
    const onEnd = () => done("complete");
    const onGone = () => done("gone");
    const timer = setTimeout(() => done("timeout"), Math.max(0, deadlineMs));
    body.on("data", onData).once("end", onEnd).once("close", onGone).once("error", onGone);
  });
}
