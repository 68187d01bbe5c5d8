/** Sleeping and spreading retries: small helpers the executor's steps share. */

/** Resolves after ms, or rejects early when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Spreads retries of contended payouts so executors do not collide in lock-step. */
export const jitter = (ms: number): number => Math.round(ms * (0.5 + Math.random()));

/**
 * Whether the executor renews its lease before submitting: once more than a fifth of the TTL has
 * passed since Acquire was sent (so at least four fifths of it are left, the grant having come
 * later). Below that a renewal buys only the few milliseconds spent since the grant, for one lock
 * RPC and one lockdb commit per payout. Never a guard: the fences decide (INV-07).
 */
export const RENEW_AFTER_TTL_FRACTION = 0.2;
export const renewDue = (sinceAcquireSentMs: number, leaseTtlMs: number): boolean => sinceAcquireSentMs > leaseTtlMs * RENEW_AFTER_TTL_FRACTION;
