/**
 * When to retry, and how long to wait: RESILIENCE.md's rules for clients, in one place.
 *
 * - What is retried is decided by outcome.ts, the one classification of failures: a server's
 *   transient answer (IDEMPOTENCY_UNAVAILABLE, IDEMPOTENCY_CONFLICT, PAYDB_UNAVAILABLE, ...), a
 *   connection never made, and an unknown outcome (a reset — connect-node's `aborted` —, a torn
 *   stream, a deadline) — all only where duplicate protection makes a repeat harmless. A final
 *   refusal (ErrorInfo with a final reason) and a configuration failure (TLS) are never retried.
 * - A call without duplicate protection (`idempotent: false`) is never retried at all.
 * - Waits: exponential backoff with full jitter (uniform in [0, min(cap, base * 2^n)]), never
 *   shorter than the server's Retry-After / RetryInfo hint.
 * - Bounds: an overall deadline per operation (a wait that would end past it is not started),
 *   a maximum number of attempts, and a retry budget shared by every call of one client (gRPC's
 *   retry throttling, gRFC A6): each transient failure costs a token, each success earns
 *   `tokenRatio`, and retries stop while the bucket is at or below half — so a broken server
 *   gets about one attempt per call instead of a retry storm.
 */
import type { ConnectError } from "@connectrpc/connect";
import { isRetryable } from "./outcome.js";

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
 * duplicates? Reads are protected by nature (they change nothing). One classification decides
 * (outcome.ts): a server's transient answer, a connection never made, and an unknown outcome (a
 * reset, a torn stream, a deadline) are retried on a protected call; a final refusal and a
 * configuration failure never are. The caller's own cancellation is never retried (attempts.ts).
 */
export function isTransient(err: ConnectError, idempotent: boolean): boolean {
  return isRetryable(err, idempotent);
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
