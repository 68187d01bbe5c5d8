/**
 * Typed errors. Every failure the library reports is a RailfenceError carrying what a caller
 * branches on: the Connect code, the google.rpc.ErrorInfo reason and metadata (domain
 * railfence.dev), the server's retry hint, and how many attempts were made. Branch on `code`
 * and `reason`, never on the message text.
 */
import { Code, type ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { classifyOutcome, type Outcome } from "./outcome.js";

/** Why the library stopped retrying, when it did. */
export type GaveUp = "deadline" | "budget" | "attempts";

export class RailfenceError extends Error {
  /** Connect code (Code.Unavailable, ...). */
  readonly code: Code;
  /** google.rpc.ErrorInfo reason; "" when the server sent none (the call never reached a handler). */
  readonly reason: string;
  readonly domain: string;
  readonly metadata: Readonly<Record<string, string>>;
  /** The server's retry hint (RetryInfo, else Retry-After), in milliseconds. */
  readonly retryAfterMs: number | undefined;
  /** The library's verdict: the failure was transient for this call (it retried, or would have). */
  readonly transient: boolean;
  /**
   * What the failure means (outcome.ts): `refused` (a final answer: nothing was done),
   * `retry-later` (the server did nothing now), `unreachable` (nothing was sent), `unknown` (the
   * request may have run: NEVER treat it as failed; submit the same intent again, or look it up),
   * `configuration` (this client's TLS setup: fix it, nothing was sent).
   */
  readonly outcome: Outcome;
  /** Attempts made (1 = no retry). */
  attempts = 1;
  /** Set when the library stopped retrying a transient failure. */
  gaveUp: GaveUp | undefined;
  /** The endpoint of the last attempt. */
  endpoint: string | undefined;
  /** The Idempotency-Key the call carried (CreatePayout): retry later with the same intent. */
  idempotencyKey: string | undefined;

  constructor(
    readonly connectError: ConnectError,
    transient: boolean,
  ) {
    super(connectError.rawMessage, { cause: connectError });
    this.name = "RailfenceError";
    const info = connectError.findDetails(ErrorInfoSchema)[0];
    this.code = connectError.code;
    this.reason = info?.reason ?? "";
    this.domain = info?.domain ?? "";
    this.metadata = { ...(info?.metadata ?? {}) };
    this.retryAfterMs = retryHintMs(connectError);
    this.transient = transient;
    this.outcome = classifyOutcome(connectError);
    if (this.outcome === "configuration") {
      this.message = `client configuration: ${connectError.rawMessage.trim()} (the TLS connection was refused before any request was sent; check the client certificate, key and CA — not retried)`;
    }
  }

  /** "unavailable", "resource_exhausted": the code as Connect and gRPC documentation spell it. */
  get codeName(): string {
    return (Code[this.code] ?? "unknown").replace(/[A-Z]/g, (m, i: number) => (i === 0 ? m.toLowerCase() : `_${m.toLowerCase()}`));
  }
}

/**
 * SubmitPayout (or another call without duplicate protection) may or may not have taken effect:
 * the answer was lost, or the rail's answer was (RAIL_AMBIGUOUS). The library never retries it.
 * `checkStatus()` asks the rail-proxy's intent ledger what happened instead.
 */
export class OutcomeUnknownError<T = unknown> extends RailfenceError {
  constructor(
    connectError: ConnectError,
    /** Reads the current status (GetSubmission): safe to call, and to retry. */
    readonly checkStatus: () => Promise<T>,
  ) {
    super(connectError, false);
    this.name = "OutcomeUnknownError";
  }
}

/** A persisted intent id was reused with a different request body: a new body is a new intent. */
export class IntentMismatchError extends Error {
  constructor(readonly intentId: string) {
    super(`intent ${intentId} was created with a different request; a changed request is a new intent (use a new intent id)`);
    this.name = "IntentMismatchError";
  }
}

/**
 * An intent's Idempotency-Key is past the server's memory of it (the `idempotency-key-expires-at`
 * the server sent, or, never told, `keyRetentionMs` after the key was minted), and LookupPayout
 * finds no payout created under it: nothing was paid under this intent. The key is NOT sent again
 * (the server would treat it as new), and no new key is minted behind the caller's back: to pay,
 * record that this intent paid nothing, `forget()` it and make a new intent.
 */
export class IntentExpiredError extends Error {
  constructor(
    /** The intent id, or the key when the intent has none. */
    readonly intentId: string,
    readonly createdAt: Date,
    readonly idempotencyKey: string,
    /** The moment the library treats the key as forgotten by the server. */
    readonly expiredAt: Date,
  ) {
    super(
      `intent ${intentId}: its Idempotency-Key ${idempotencyKey} (created ${createdAt.toISOString()}) is past the server's retention (${expiredAt.toISOString()}) and the server has no payout created under it; it is not sent again. To pay, forget() this intent and make a new one`,
    );
    this.name = "IntentExpiredError";
  }
}

/** RetryInfo's delay, else a Retry-After header in seconds; undefined when the server gave none. */
export function retryHintMs(err: ConnectError): number | undefined {
  const delay = err.findDetails(RetryInfoSchema)[0]?.retryDelay;
  if (delay) return Number(delay.seconds) * 1000 + Math.round(delay.nanos / 1e6);
  const header = err.metadata.get("retry-after");
  if (header && /^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  return undefined;
}

/** True when a railfence server answered (ErrorInfo present), false for transport failures. */
export function serverAnswered(err: ConnectError): boolean {
  return err.findDetails(ErrorInfoSchema).length > 0;
}
