/**
 * Writes a refusal made before any handler ran (request-gate.ts) on a raw HTTP/2 stream, in the
 * wire format of the protocol the request spoke, with its ErrorInfo readable by gRPC, gRPC-Web
 * and Connect clients alike; then resets the stream so a client still sending its body stops
 * and sees the stream end (RST_STREAM NO_ERROR after a complete response, RFC 9113 §8.1).
 *
 * The encodings are connect's own protocol functions, so a refusal from here is byte-for-byte what
 * a handler error would look like.
 */
import http2 from "node:http2";
import type { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, endStreamFlag, endStreamToJson, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { RequestProtocol } from "./wire-protocol.js";

/** Response headers and body of a refusal, for any HTTP/2 server to send. */
export function encodeRefusal(
  error: ConnectError,
  protocol: RequestProtocol | undefined,
  httpStatus?: number,
): { headers: http2.OutgoingHttpHeaders; body?: Uint8Array } {
  const headers: http2.OutgoingHttpHeaders = {};
  if (protocol?.name === "grpc" || protocol?.name === "grpc-web") {
    // Trailers-only: status and details travel in the one HEADERS frame.
    const prefix = protocol.name === "grpc" ? "application/grpc" : "application/grpc-web";
    headers[":status"] = httpStatus ?? 200;
    headers["content-type"] = `${prefix}+${protocol.binary ? "proto" : "json"}`;
    setTrailerStatus(new Headers(), error).forEach((v, k) => {
      headers[k] = v;
    });
    return { headers };
  }
  error.metadata.forEach((v, k) => {
    headers[k] = v;
  });
  if (protocol?.name === "connect-stream") {
    headers[":status"] = 200;
    headers["content-type"] = `application/connect+${protocol.binary ? "proto" : "json"}`;
    const json = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), error, undefined)));
    const body = new Uint8Array(5 + json.byteLength);
    body[0] = endStreamFlag;
    new DataView(body.buffer).setUint32(1, json.byteLength);
    body.set(json, 5);
    return { headers, body };
  }
  // Connect unary, or no protocol at all: a Connect error body, which curl users can read too.
  headers[":status"] = httpStatus ?? codeToHttpStatus(error.code);
  headers["content-type"] = "application/json";
  return { headers, body: errorToJsonBytes(error, undefined) };
}

/** Sends the refusal on stream (unless it is already answered or gone) and resets it. */
export function writeRefusal(stream: http2.ServerHttp2Stream, error: ConnectError, protocol: RequestProtocol | undefined, httpStatus?: number): void {
  if (stream.destroyed || stream.closed) return;
  const reset = () => {
    if (!stream.destroyed && !stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  };
  if (stream.headersSent) return reset();
  const { headers, body } = encodeRefusal(error, protocol, httpStatus);
  if (body) headers["content-length"] = body.byteLength;
  stream.respond(headers, { endStream: body === undefined });
  if (body) stream.end(body, reset);
  else setImmediate(reset);
}
