/**
 * The bytes both halves of the direct unary path share (grpc-unary-server.ts answers with them,
 * grpc-unary-client.ts sends with them): a message frame, and HTTP/2 headers as web Headers.
 * Its own module so that the client does not import the server.
 */
import type http2 from "node:http2";

/** HTTP/2 headers as web Headers, pseudo-headers left out (both halves of the direct path). */
export function webHeaders(headers: http2.IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const key in headers) {
    if (key.charCodeAt(0) === 58 /* ":" */) continue;
    const v = headers[key];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const one of v) h.append(key, one);
    else h.set(key, v);
  }
  return h;
}

/** A gRPC message frame: flags 0 (uncompressed), big-endian length, the bytes. */
export function grpcFrame(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + bytes.byteLength);
  out[0] = 0;
  out.writeUInt32BE(bytes.byteLength, 1);
  out.set(bytes, 5);
  return out;
}
