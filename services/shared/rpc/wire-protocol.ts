/**
 * Which of the wire protocols a request speaks, read from its method and content type alone, so a
 * server can apply limits, deadlines and decoding before any framework touches the body. The
 * patterns are the ones connect-node routes by (wire-protocol.test.ts holds them to agreement):
 * a request this module calls JSON is never decoded as protobuf further in, or the other way.
 */

export type ProtocolName = "grpc" | "grpc-web" | "connect" | "connect-stream";

export interface RequestProtocol {
  name: ProtocolName;
  /** Protobuf binary (true) or JSON. */
  binary: boolean;
  /** Length-prefixed envelopes (gRPC, gRPC-Web, Connect streaming) or one plain body (Connect unary). */
  enveloped: boolean;
  /** The header carrying the client's deadline. */
  timeoutHeader: "grpc-timeout" | "connect-timeout-ms";
  /** The header naming the request's compression. */
  encodingHeader: "grpc-encoding" | "connect-content-encoding" | "content-encoding";
}

const GRPC = /^application\/grpc(?:\+(?:(json)(?:; ?charset=utf-?8)?|proto))?$/i;
const GRPC_WEB = /^application\/grpc-web(?:\+(?:(json)(?:; ?charset=utf-?8)?|proto))?$/i;
const CONNECT_UNARY = /^application\/(?:(json)(?:; ?charset=utf-?8)?|proto)$/i;
const CONNECT_STREAM = /^application\/connect\+(?:(json)(?:; ?charset=utf-?8)?|proto)$/i;

/**
 * The protocol of a POST with this content type for a method of this kind, or undefined when no
 * protocol railfence serves matches (gRPC-Web text, form posts, GET, ...).
 */
export function requestProtocol(method: string | undefined, contentType: string | undefined, streamingResponse: boolean): RequestProtocol | undefined {
  if (method !== "POST" || contentType === undefined) return undefined;
  let m = GRPC.exec(contentType);
  if (m) return { name: "grpc", binary: !m[1], enveloped: true, timeoutHeader: "grpc-timeout", encodingHeader: "grpc-encoding" };
  m = GRPC_WEB.exec(contentType);
  if (m) return { name: "grpc-web", binary: !m[1], enveloped: true, timeoutHeader: "grpc-timeout", encodingHeader: "grpc-encoding" };
  // Connect serves unary methods with plain bodies and streaming ones with envelopes, never mixed.
  m = (streamingResponse ? CONNECT_STREAM : CONNECT_UNARY).exec(contentType);
  if (!m) return undefined;
  return streamingResponse
    ? { name: "connect-stream", binary: !m[1], enveloped: true, timeoutHeader: "connect-timeout-ms", encodingHeader: "connect-content-encoding" }
    : { name: "connect", binary: !m[1], enveloped: false, timeoutHeader: "connect-timeout-ms", encodingHeader: "content-encoding" };
}

/** A client deadline header, parsed: milliseconds, or why it is refused. */
export type ClientTimeout = { kind: "none" } | { kind: "ms"; ms: number } | { kind: "malformed" } | { kind: "too_long"; ms: number };

const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const GRPC_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };
const CONNECT_TIMEOUT = /^\d{1,10}$/;

/** Parses grpc-timeout ("<1-8 digits><H|M|S|m|u|n>") or connect-timeout-ms ("<1-10 digits>"). */
export function parseClientTimeout(header: RequestProtocol["timeoutHeader"], value: string | undefined, maxMs: number): ClientTimeout {
  if (value === undefined) return { kind: "none" };
  let ms: number;
  if (header === "grpc-timeout") {
    const m = GRPC_TIMEOUT.exec(value);
    if (!m) return { kind: "malformed" };
    ms = Number(m[1]) * GRPC_UNIT_MS[m[2]!]!;
  } else {
    if (!CONNECT_TIMEOUT.test(value)) return { kind: "malformed" };
    ms = Number(value);
  }
  return ms > maxMs ? { kind: "too_long", ms } : { kind: "ms", ms };
}

/** A deadline header value for the time left (what a framework further in should enforce). */
export function formatClientTimeout(header: RequestProtocol["timeoutHeader"], ms: number): string {
  const whole = Math.max(0, Math.floor(ms));
  return header === "grpc-timeout" ? `${whole}m` : String(whole);
}
