/**
 * The request body of one call, judged while it arrives: how much a body may grow, when it has
 * grown too large (decided at the first bytes that prove it, not after reading it all), and
 * whether what arrived is exactly one well-formed message. Pure functions over bytes, so any
 * server stack (connect-node, grpc-js, hand-written node:http2) can use them.
 *
 * Every railfence method takes exactly one request message, so an enveloped body (gRPC,
 * gRPC-Web, Connect streaming) must be exactly one envelope: a flags byte, a 4-byte big-endian
 * length and that many bytes. Flags other than "compressed" (0x01) are refused.
 */

export const ENVELOPE_HEADER_BYTES = 5;
export const FLAG_COMPRESSED = 0x01;

/** How a body can fail before or when it is complete. */
export type BodyProblem =
  | { kind: "too_large"; declaredBytes?: number }
  | { kind: "malformed"; problem: "incomplete_envelope" | "extra_data" | "missing_message" | "bad_flags" | "bad_compression" };

/** What one message body turned out to be. */
export interface BodyMessage {
  /** The message bytes (still compressed when `compressed`). */
  payload: Uint8Array;
  compressed: boolean;
  /** The whole body as received (the one envelope, or the plain body). */
  body: Uint8Array;
}

/**
 * Watches a body grow chunk by chunk. `push` returns a problem as soon as one is certain (a
 * length prefix beyond the limit, bytes after the one envelope); `finish` judges the complete body.
 */
export class BodyCollector {
  /** A problem known before the first byte (a Content-Length beyond the limit). */
  readonly early: BodyProblem | undefined;
  private readonly chunks: Uint8Array[] = [];
  private received = 0;
  private head: Uint8Array | undefined;

  /**
   * @param enveloped one length-prefixed envelope (true) or a plain body (false)
   * @param maxMessageBytes largest message accepted (the envelope header is not counted)
   * @param declaredLength a plain body's Content-Length, if the client sent one
   */
  constructor(
    private readonly enveloped: boolean,
    private readonly maxMessageBytes: number,
    declaredLength?: number,
  ) {
    if (!enveloped && declaredLength !== undefined && declaredLength > maxMessageBytes) this.early = { kind: "too_large", declaredBytes: declaredLength };
  }

  get bytesReceived(): number {
    return this.received;
  }

  push(chunk: Uint8Array): BodyProblem | undefined {
    this.chunks.push(chunk);
    this.received += chunk.byteLength;
    if (!this.enveloped) return this.received > this.maxMessageBytes ? { kind: "too_large" } : undefined;
    if (this.received < ENVELOPE_HEADER_BYTES) return undefined;
    this.head ??= this.concat().subarray(0, ENVELOPE_HEADER_BYTES);
    const head = this.head;
    const declared = new DataView(head.buffer, head.byteOffset, ENVELOPE_HEADER_BYTES).getUint32(1);
    if (declared > this.maxMessageBytes) return { kind: "too_large", declaredBytes: declared };
    if (this.received > ENVELOPE_HEADER_BYTES + declared) return { kind: "malformed", problem: "extra_data" };
    return undefined;
  }

  /** Judges the body once the client has sent all of it. */
  finish(): BodyMessage | BodyProblem {
    const body = this.concat();
    if (!this.enveloped) return { payload: body, compressed: false, body };
    if (body.byteLength === 0) return { kind: "malformed", problem: "missing_message" };
    if (body.byteLength < ENVELOPE_HEADER_BYTES) return { kind: "malformed", problem: "incomplete_envelope" };
    const flags = body[0]!;
    const declared = new DataView(body.buffer, body.byteOffset, ENVELOPE_HEADER_BYTES).getUint32(1);
    if (declared > this.maxMessageBytes) return { kind: "too_large", declaredBytes: declared };
    if (body.byteLength < ENVELOPE_HEADER_BYTES + declared) return { kind: "malformed", problem: "incomplete_envelope" };
    if (body.byteLength > ENVELOPE_HEADER_BYTES + declared) return { kind: "malformed", problem: "extra_data" };
    if ((flags & ~FLAG_COMPRESSED) !== 0) return { kind: "malformed", problem: "bad_flags" };
    return { payload: body.subarray(ENVELOPE_HEADER_BYTES), compressed: (flags & FLAG_COMPRESSED) !== 0, body };
  }

  private concat(): Uint8Array {
    if (this.chunks.length === 1) return this.chunks[0]!;
    const all = Buffer.concat(this.chunks, this.received);
    this.chunks.splice(0, this.chunks.length, all);
    return all;
  }
}

/** One uncompressed envelope around a message (what a framework further in will accept as is). */
export function encodeEnvelope(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(ENVELOPE_HEADER_BYTES + payload.byteLength);
  new DataView(out.buffer).setUint32(1, payload.byteLength);
  out.set(payload, ENVELOPE_HEADER_BYTES);
  return out;
}
