/**
 * Runs one operation as a bounded series of attempts under the rules of retry.ts: each attempt
 * gets the smaller of the per-attempt timeout and what is left of the operation's deadline; a
 * transient failure is retried after backoff (never sooner than the server's hint) while the
 * deadline, the attempt limit and the client's retry budget allow; anything else is final.
 * With several endpoints (rail-proxy replicas), each retry goes to the next one.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { RailfenceError, retryHintMs, type GaveUp } from "./errors.js";
import { backoffMs, isTransient, sleep, type RetryPolicy } from "./retry.js";

/** Per-call settings every operation accepts. */
export interface CallOptions {
  /** Overall deadline of the operation, every retry included (ms). */
  deadlineMs?: number;
  /** Deadline of one attempt (ms), sent to the server as the call's timeout. */
  timeoutMs?: number;
  /** Cancels the operation (an attempt in flight, or a wait between attempts). */
  signal?: AbortSignal;
}

export interface AttemptContext {
  endpoint: string;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  /** 1 for the first attempt. */
  attempt: number;
}

export interface RunSettings {
  policy: RetryPolicy;
  endpoints: readonly string[];
  /** Protected against duplicates (a read, or CreatePayout with its key): may be retried. */
  idempotent: boolean;
  deadlineMs: number;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Rotates the starting endpoint between operations. */
  startAt?: number;
}

export interface RunResult<T> {
  value: T;
  attempts: number;
  endpoint: string;
}

export async function runAttempts<T>(s: RunSettings, attempt: (a: AttemptContext) => Promise<T>): Promise<RunResult<T>> {
  if (s.endpoints.length === 0) throw new RailfenceError(new ConnectError("no endpoint configured", Code.FailedPrecondition), false);
  const deadline = Date.now() + s.deadlineMs;
  const { policy } = s;
  for (let n = 1; ; n++) {
    const endpoint = s.endpoints[((s.startAt ?? 0) + n - 1) % s.endpoints.length]!;
    const remaining = deadline - Date.now();
    try {
      const value = await attempt({ endpoint, timeoutMs: Math.max(1, Math.min(s.timeoutMs, remaining)), signal: s.signal, attempt: n });
      policy.budget?.onSuccess();
      return { value, attempts: n, endpoint };
    } catch (err) {
      const ce = ConnectError.from(err);
      // Only what the transport reported can be transient: a plain exception is a bug, not an outage.
      const transient = err instanceof ConnectError && isTransient(ce, s.idempotent) && !s.signal?.aborted;
      if (transient) policy.budget?.onFailure();
      const fail = (gaveUp?: GaveUp) => {
        const e = new RailfenceError(ce, transient);
        e.attempts = n;
        e.gaveUp = gaveUp;
        e.endpoint = endpoint;
        return e;
      };
      if (!transient) throw fail();
      if (n >= policy.maxAttempts) throw fail("attempts");
      if (policy.budget && !policy.budget.allowsRetry) throw fail("budget");
      const wait = Math.max(retryHintMs(ce) ?? 0, backoffMs(n - 1, policy.baseDelayMs, policy.maxDelayMs, policy.random));
      // Waiting past the deadline helps nobody: report now, with the server's hint on the error.
      if (Date.now() + wait >= deadline) throw fail("deadline");
      await sleep(wait, s.signal).catch(() => {
        throw fail();
      });
    }
  }
}
