/**
 * The last moment before a request leaves, for a call whose sending is decided at that moment:
 * the rail call and its pre-forward budget (ADR-007, rail-proxy/admission.ts). The direct unary
 * client (grpc-unary-client.ts) first waits for a connected session (a request is never queued
 * on one still connecting), then asks the gate synchronously right before it opens the stream (no
 * await between the answer and the write), and tells it once the request was handed to the
 * socket. What remains between the two is the residual window (docs/threat-model.md): a stall
 * there cannot be prevented by the process, only seen, and `sent` is where it is seen.
 *
 * A transport that does not know the gate (connect-node's, RAILFENCE_CONNECT_UNARY=client)
 * ignores it: the caller's own check before the call is then the last one.
 */
import { createContextKey, createContextValues, type ContextValues } from "@connectrpc/connect";

export interface SendGate {
  /** Synchronous, just before the stream opens: a reason refuses the send, and nothing is written. */
  beforeSend(): string | undefined;
  /** The whole request (headers, message, end of stream) was written to the socket. */
  sent(): void;
  /**
   * The call ended before any stream was opened (the connection was not established in time,
   * or closed first): not a byte of the request was written, and the connection attempt was
   * reset, so none can be later. The gate was not asked.
   */
  unsent?(reason: string): void;
}

export const SEND_GATE = createContextKey<SendGate | undefined>(undefined, { description: "railfence send gate" });

/** Call options' contextValues carrying `gate`. */
export function sendGateContext(gate: SendGate): ContextValues {
  return createContextValues().set(SEND_GATE, gate);
}
