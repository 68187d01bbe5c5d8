/**
 * The gate for streams of requests (client and bidi streaming; gRPC reflection is the only such
 * method railfence serves). The request gate collects one message per call; a stream's messages
 * are read by connect-node as they come, and connect-node answers a message it cannot parse
 * `internal` with the decoder's text ("parse binary: ..."). Here every envelope is checked with
 * the gate's own strict decoder (request-decode.ts) before connect-node sees it, so a malformed
 * message ends the call `invalid_argument` `MALFORMED_REQUEST` (or `UNKNOWN_FIELD` for JSON) like
 * any unary request, and the size limit holds per message.
 */
import type { DescMessage } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { railError, REASONS, toConnectError } from "../domain/errors.js";
import { ENVELOPE_HEADER_BYTES, FLAG_COMPRESSED } from "./request-body.js";
import { decodeRequest, malformedRequest } from "./request-decode.js";
import { decompressMessage } from "./request-decompress.js";

/** Connect streaming's end-of-stream envelope (client streams never send one; kept as is). */
const FLAG_END_STREAM = 0x02;

export interface StreamCheck {
  /** The method's request type. */
  input: DescMessage;
  /** Protobuf binary (true) or JSON (false), as the content type said. */
  binary: boolean;
  /** The request's message encoding header (grpc-encoding / connect-content-encoding). */
  encoding: string | undefined;
  /** Largest message accepted (bytes, after decompression). */
  maxMessageBytes: number;
}

/**
 * Passes `body`'s envelopes on unchanged once each has decoded strictly; throws the refusal
 * (a ConnectError with ErrorInfo) at the first one that does not, which connect-node delivers to
 * the method as the error of its request stream.
 */
export async function* checkedRequestStream(body: AsyncIterable<Uint8Array>, check: StreamCheck): AsyncGenerator<Uint8Array> {
  let pending: Uint8Array = new Uint8Array(0);
  for await (const chunk of body) {
    pending = pending.byteLength === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.byteLength >= ENVELOPE_HEADER_BYTES) {
      const flags = pending[0]!;
      const length = new DataView(pending.buffer, pending.byteOffset, ENVELOPE_HEADER_BYTES).getUint32(1);
      if (length > check.maxMessageBytes) throw tooLarge(check.maxMessageBytes);
      if (pending.byteLength < ENVELOPE_HEADER_BYTES + length) break;
      const envelope = pending.subarray(0, ENVELOPE_HEADER_BYTES + length);
      pending = pending.subarray(ENVELOPE_HEADER_BYTES + length);
      if (flags !== FLAG_END_STREAM) checkMessage(flags, envelope.subarray(ENVELOPE_HEADER_BYTES), check);
      yield envelope;
    }
  }
  if (pending.byteLength > 0) throw toConnectError(malformedRequest("incomplete_envelope"));
}

function checkMessage(flags: number, payload: Uint8Array, check: StreamCheck): void {
  if ((flags & ~FLAG_COMPRESSED) !== 0) throw toConnectError(malformedRequest("bad_flags"));
  const message = decompressMessage(payload, (flags & FLAG_COMPRESSED) !== 0, check.encoding, check.maxMessageBytes);
  if ("kind" in message) throw message.kind === "too_large" ? tooLarge(check.maxMessageBytes) : toConnectError(malformedRequest(message.problem));
  try {
    decodeRequest(check.input, message, check.binary);
  } catch (err) {
    throw toConnectError(err);
  }
}

function tooLarge(limit: number): ConnectError {
  return railError(REASONS.REQUEST_TOO_LARGE, `request message larger than ${limit} bytes`, { limit_bytes: String(limit) });
}
