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
