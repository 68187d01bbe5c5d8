/**
 * The only ways a test waits (test/architecture/no-sleeps.test.ts keeps it so):
 *
 * - `eventually`: for a condition another process makes true. Polls; returns as soon as it holds.
 * - `quietFor`: a window in which something must NOT happen ("give a second submission every
 *   chance"). Waiting is the assertion itself: no event marks the absence of one.
 * - `letTimePass`: a condition that is time itself (a lease's TTL, a deadline, an outage of a
 *   given length), which no event announces.
 *
 * A bare sleep "so that it has happened" is a race that a slower machine loses: wait on the
 * event instead. The two named waits say why no event can be waited on.
 */
import { setTimeout as delay } from "node:timers/promises";

export interface EventuallyOptions {
  /** Give up after this long (default 20 s). */
  timeoutMs?: number;
  /** Pause between tries (default 50 ms). */
  everyMs?: number;
  /** A throw means "not yet" (e.g. a backend restarting); the last error is reported at the end. */
  retryOnThrow?: boolean;
}

/** Polls fn until it returns a truthy value; throws naming `what` after the timeout. */
export async function eventually<T>(
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  options: number | EventuallyOptions = {},
): Promise<T> {
  const { timeoutMs = 20_000, everyMs = 50, retryOnThrow = false } = typeof options === "number" ? { timeoutMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      if (!retryOnThrow) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}${why}`, { cause: lastError });
    }
    await delay(everyMs);
  }
}

/** A window in which something must not happen; `why` names it. */
export async function quietFor(ms: number, why: string): Promise<void> {
  void why;
  await delay(Math.max(0, ms));
}

/** Lets time itself pass (a TTL, a deadline, an outage's length); `why` names the clock. */
export async function letTimePass(ms: number, why: string): Promise<void> {
  void why;
  await delay(Math.max(0, ms));
}
