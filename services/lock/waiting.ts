/**
 * The waiting part of Acquire, shared by both backends: try, and while the key is held sleep
 * until something says it may have changed (a release notification, a watch event, the
 * holder's expiry) or a bounded, jittered poll interval passes, then try again, until wait_ms
 * runs out. Never a busy loop; never dependent on a notification arriving (a lost LISTEN
 * connection or watch stream only makes waiting slower, not wrong).
 */
import { AcquireAbortedError } from "./lock-backend.js";

/**
 * A level-triggered wake-up flag. A kick that lands while nobody is waiting is remembered, so a
 * release that happens between a failed attempt and the next sleep is never lost.
 */
export class Wakeup {
  private pending = false;
  private wake: (() => void) | undefined;

  kick(): void {
    this.pending = true;
    this.wake?.();
  }

  /** Resolves after ms, on a kick (or at once if one is pending), or rejects when signal aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.wake = undefined;
        this.pending = false;
      };
      const onAbort = () => {
        done();
        reject(new AcquireAbortedError());
      };
      const timer = setTimeout(
        () => {
          done();
          resolve();
        },
        Math.max(0, ms),
      );
      this.wake = () => {
        done();
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** One attempt's result: the grant, or "held" with an optional hint of when to look again. */
export type Attempt<G> = { granted: G; retryInMs?: undefined } | { granted?: undefined; retryInMs?: number };

export interface WaitOptions<G> {
  waitMs: number;
  signal?: AbortSignal;
  wakeup: Wakeup;
  attempt: () => Promise<Attempt<G>>;
  /** Upper bound of one sleep: how stale a waiter may be if every notification is lost. */
  maxSleepMs?: number;
}

/** Tries until granted or waitMs has passed (one last attempt at the deadline). */
export async function attemptUntil<G>(opts: WaitOptions<G>): Promise<G | undefined> {
  const maxSleepMs = opts.maxSleepMs ?? 1000;
  const deadline = performance.now() + opts.waitMs;
  for (;;) {
    if (opts.signal?.aborted) throw new AcquireAbortedError();
    const result = await opts.attempt();
    if (result.granted !== undefined) return result.granted;
    const remaining = deadline - performance.now();
    if (remaining <= 0) return undefined;
    // Jitter keeps many waiters on one key from polling in lockstep.
    const poll = maxSleepMs * (0.75 + Math.random() * 0.25);
    const hint = result.retryInMs === undefined ? poll : result.retryInMs + 5;
    await opts.wakeup.wait(Math.min(remaining, poll, hint), opts.signal);
  }
}
