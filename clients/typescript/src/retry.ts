/**
 * When to retry, and how long to wait: RESILIENCE.md's rules for clients, in one place.
 *
 * - Only transient failures are retried: `unavailable` (network errors, 502, 503, and the
 *   servers' own IDEMPOTENCY_UNAVAILABLE / LIMITS_UNAVAILABLE / PAYDB_UNAVAILABLE), ABORTED
 *   IDEMPOTENCY_CONFLICT (409: the first request with the key is still running), and — only
 *   where duplicate protection makes a repeat harmless — `deadline_exceeded` (504) and a
 *   transport failure that never reached a handler. Every other refusal is final.
 * - A call without duplicate protection (`idempotent: false`) is never retried at all.
 * - Waits: exponential backoff with full jitter (uniform in [0, min(cap, base * 2^n)]), never
 *   shorter than the server's Retry-After / RetryInfo hint.
 * - Bounds: an overall deadline per operation (a wait that would end past it is not started),
 *   a maximum number of attempts, and a retry budget shared by every call of one client (gRPC's
 *   retry throttling, gRFC A6): each transient failure costs a token, each success earns
 *   `tokenRatio`, and retries stop while the bucket is at or below half — so a broken server
 *   gets about one attempt per call instead of a retry storm.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { serverAnswered } from "./errors.js";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { TRANSIENT_REASONS } from "./reasons.js";

export interface RetryOptions {
  /** Attempts per operation, the first included (default 6). */
  maxAttempts?: number;
  /** Backoff base and cap (defaults 100 ms and 5 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Retry throttling per client; false turns it off (default 10 tokens, ratio 0.1). */
  budget?: { maxTokens: number; tokenRatio: number } | false;
}

/**
 * The rule: may this failure be retried, for a call that is (or is not) protected against
 * duplicates? Reads are protected by nature (they change nothing).
 */
export function isTransient(err: ConnectError, idempotent: boolean): boolean {
  if (!idempotent) return false;
  if (err.code === Code.Unavailable) return true;
  if (err.code === Code.DeadlineExceeded) return true;
  // Reasons the catalogue calls transient even where the code alone would not (IDEMPOTENCY_CONFLICT).
  if (TRANSIENT_REASONS.has(reasonOf(err))) return true;
  // A transport failure (stream reset, connection lost, the server process gone) is reported as
  // internal, unknown or canceled without a railfence ErrorInfo: the server may or may not have
  // run the call, which a protected call survives. A server's own internal error carries
  // ErrorInfo INTERNAL and is final; the caller's own cancellation is never retried (attempts.ts).
  if ((err.code === Code.Internal || err.code === Code.Unknown || err.code === Code.Canceled) && !serverAnswered(err)) return true;
  return false;
}

function reasonOf(err: ConnectError): string {
  return err.findDetails(ErrorInfoSchema)[0]?.reason ?? "";
}

/** Exponential backoff with full jitter: uniform in [0, min(max, base * 2^retry)). */
export function backoffMs(retry: number, base: number, max: number, random: () => number = Math.random): number {
  return Math.floor(random() * Math.min(max, base * 2 ** retry));
}

/** gRPC retry throttling (gRFC A6), shared by every call of one client. */
export class RetryBudget {
  private tokens: number;

  constructor(
    readonly maxTokens: number,
    readonly tokenRatio: number,
  ) {
    this.tokens = maxTokens;
  }

  onSuccess(): void {
    this.tokens = Math.min(this.maxTokens, this.tokens + this.tokenRatio);
  }

  onFailure(): void {
    this.tokens = Math.max(0, this.tokens - 1);
  }

  /** Retries are allowed while the bucket is above half full. */
  get allowsRetry(): boolean {
    return this.tokens > this.maxTokens / 2;
  }

  get available(): number {
    return this.tokens;
  }
}

/** The resolved retry settings of one client. */
export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  budget: RetryBudget | undefined;
  random: () => number;
}

export function retryPolicy(o: RetryOptions = {}, random: () => number = Math.random): RetryPolicy {
  const b = o.budget === undefined ? { maxTokens: 10, tokenRatio: 0.1 } : o.budget;
  return {
    maxAttempts: Math.max(1, o.maxAttempts ?? 6),
    baseDelayMs: o.baseDelayMs ?? 100,
    maxDelayMs: o.maxDelayMs ?? 5000,
    budget: b === false ? undefined : new RetryBudget(b.maxTokens, b.tokenRatio),
    random,
  };
}

/** Waits ms, or rejects when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
