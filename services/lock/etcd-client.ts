/**
 * The etcd3 client as the lock service needs it: every unary call bounded by a deadline, and
 * no retries or circuit breaker inside the client.
 *
 * Why no retries: a retried put-if-absent whose first answer was lost would find its own key
 * and report "held" (or worse, the caller would never learn of a grant); the backend instead
 * turns any failure into UNAVAILABLE at once and revokes what it may have created. Why no
 * breaker: after etcd comes back, the service must serve again on the next call, not 5 s later.
 */
import { Etcd3, type IOptions } from "etcd3";

/** A policy that runs the call once. Only `execute` is used by etcd3's connection pool. */
const runOnce = {
  execute: <T>(fn: (ctx: { signal: AbortSignal }) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> =>
    Promise.resolve().then(() => fn({ signal: signal ?? new AbortController().signal })),
  onSuccess: () => ({ dispose() {} }),
  onFailure: () => ({ dispose() {} }),
};

type FaultHandling = NonNullable<IOptions["faultHandling"]>;

export interface EtcdClientOptions {
  endpoints: string[];
  /** Deadline of every unary call (streams, i.e. watches, are not bounded). */
  callTimeoutMs: number;
}

export function createEtcdClient(opts: EtcdClientOptions): Etcd3 {
  const policy = runOnce as unknown as NonNullable<FaultHandling["global"]>;
  return new Etcd3({
    hosts: opts.endpoints,
    dialTimeout: opts.callTimeoutMs,
    defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + opts.callTimeoutMs }),
    faultHandling: { global: policy, host: () => policy },
  });
}
