/**
 * Decompression of a request message with a bound on what it may inflate to, so a small gzip
 * bomb is refused as too large instead of filling memory. The encodings are the ones
 * connect-node accepts by default (gzip, br); "identity" means none.
 */
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import type { BodyProblem } from "./request-body.js";

export const ACCEPTED_ENCODINGS = ["gzip", "br"] as const;

/** The request names an encoding this server cannot decode (gRPC: UNIMPLEMENTED). */
export interface UnsupportedEncoding {
  kind: "unsupported_encoding";
}

/** True when a request's encoding header names something this server cannot decode. */
export function encodingSupported(encoding: string | undefined): boolean {
  return encoding === undefined || encoding === "identity" || (ACCEPTED_ENCODINGS as readonly string[]).includes(encoding);
}

/**
 * The message bytes after decoding `encoding`: the input when it is not compressed, or a
 * problem (a compressed message without an encoding, a corrupt stream, output beyond maxBytes).
 */
export function decompressMessage(payload: Uint8Array, compressed: boolean, encoding: string | undefined, maxBytes: number): Uint8Array | BodyProblem {
  if (!compressed) return payload;
  if (encoding === undefined || encoding === "identity") return { kind: "malformed", problem: "bad_flags" };
  try {
    const opts = { maxOutputLength: maxBytes };
    return encoding === "gzip" ? gunzipSync(payload, opts) : brotliDecompressSync(payload, opts);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") return { kind: "too_large" };
    return { kind: "malformed", problem: "bad_compression" };
  }
}
