/**
 * The ids of the call being served, for every response and every log line it causes (decision
 * 054): the trace id (the caller's W3C `traceparent` trace id when it sent a valid one, else a new
 * random one; the server span's once tracing runs) and the caller's `x-request-id`, when valid.
 *
 * Why AsyncLocalStorage: a log line deep inside a store or a nested client call must carry the
 * ids without every function passing them along; the context follows the call's promises.
 * Why stamp the stream: every answer of a call (a handler's success or error, a refusal written by
 * the gate or the direct gRPC path, for Connect, gRPC and gRPC-Web alike) leaves through the
 * HTTP/2 stream's one `respond`, so the ids are added there, once, and win over any header of the
 * same name a relayed error might carry.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import type http2 from "node:http2";

/** Response header with the call's trace id (32 lowercase hex digits). */
export const TRACE_ID_HEADER = "railfence-trace-id";
/** Request header a caller may send; echoed on the response and logged when valid. */
export const REQUEST_ID_HEADER = "x-request-id";
/** Longest x-request-id accepted (a UUID is 36; room for a prefix). */
export const REQUEST_ID_MAX_LENGTH = 128;

export interface CallIds {
  /** 32 lowercase hex digits; replaced by the server span's trace id once one starts. */
  traceId: string;
  /** The server span's id, once one starts (tracing on). */
  spanId?: string;
  /** The caller's x-request-id, when it sent a valid one. */
  readonly requestId?: string;
}

const storage = new AsyncLocalStorage<CallIds>();

/** The ids of the call the current code runs for; undefined outside a served call. */
export function currentCall(): CallIds | undefined {
  return storage.getStore();
}

/** Runs fn (and everything it starts) as part of the call with these ids. */
export function runInCall<T>(ids: CallIds, fn: () => T): T {
  return storage.run(ids, fn);
}

/**
 * A request id is diagnostics, not a contract: 1..128 visible ASCII characters (0x21-0x7e), so it
 * cannot break a log line or a header. Anything else is ignored (not echoed, not logged), never
 * refused: a proxy's odd id must not fail a payment.
 */
export function validRequestId(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.length === 0 || v.length > REQUEST_ID_MAX_LENGTH) return undefined;
  return /^[\x21-\x7e]+$/.test(v) ? v : undefined;
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The trace id of a valid W3C traceparent (not all zeros), else undefined. */
export function traceIdOf(traceparent: string | string[] | undefined): string | undefined {
  const v = Array.isArray(traceparent) ? traceparent[0] : traceparent;
  const id = v === undefined ? undefined : TRACEPARENT.exec(v.trim())?.[1];
  return id === undefined || /^0+$/.test(id) ? undefined : id;
}

/** The ids of a call that arrived with these headers. */
export function callIdsFor(headers: http2.IncomingHttpHeaders): CallIds {
  const requestId = validRequestId(headers[REQUEST_ID_HEADER]);
  const traceId = traceIdOf(headers.traceparent) ?? randomBytes(16).toString("hex");
  return requestId === undefined ? { traceId } : { traceId, requestId };
}

/** The headers every answer of the call carries. */
export function responseIdHeaders(ids: CallIds): Record<string, string> {
  const out: Record<string, string> = { [TRACE_ID_HEADER]: ids.traceId };
  // W3C Trace Context level 2's response header, when a server span exists to name.
  if (ids.spanId) out.traceresponse = `00-${ids.traceId}-${ids.spanId}-01`;
  if (ids.requestId !== undefined) out[REQUEST_ID_HEADER] = ids.requestId;
  return out;
}

/**
 * Adds the call's ids to the stream's response headers, whoever writes them (connect-node through
 * the compatibility response, refusal.ts and the direct gRPC path on the stream itself). Read at
 * respond time, so a trace id the server span set after arrival is the one sent.
 */
export function stampResponses(stream: http2.ServerHttp2Stream, ids: CallIds): void {
  const respond = stream.respond.bind(stream);
  stream.respond = (headers?: http2.OutgoingHttpHeaders, options?: http2.ServerStreamResponseOptions) =>
    respond({ ...headers, ...responseIdHeaders(ids) }, options);
}
