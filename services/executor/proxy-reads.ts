/**
 * The executor's reads at rail-proxy: a submission by its reference, and every submission of a
 * payout. Reads are safe to ask again (on another replica), so each is retried a few times; a
 * read that still fails says so and the caller changes nothing (a failed lookup never moves any
 * bookkeeping: the money-safety review's reproduction 2a).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import type { ProxyPool } from "./clients.js";
import { jitter, sleep } from "./timing.js";

/** A read through the proxy: the value, "never admitted", or "could not ask". */
export type Lookup<T> = { kind: "found"; value: T } | { kind: "not_found" } | { kind: "error"; error: unknown };

export function createProxyReads(proxies: ProxyPool, opts: { callTimeoutMs: number; pollIntervalMs: number }) {
  async function read<T>(call: (c: ReturnType<ProxyPool["next"]>) => Promise<T | undefined>): Promise<Lookup<T>> {
    let last: unknown;
    for (let attempt = 0; attempt < Math.max(3, proxies.size); attempt++) {
      try {
        const value = await call(proxies.next());
        if (value !== undefined) return { kind: "found", value };
        return { kind: "error", error: new Error("rail-proxy answered without a value") };
      } catch (err) {
        if (ConnectError.from(err).code === Code.NotFound) return { kind: "not_found" };
        last = err;
        await sleep(jitter(Math.min(1000, opts.pollIntervalMs * 2 ** attempt)));
      }
    }
    return { kind: "error", error: last };
  }
  return {
    /** The submission made under `reference`. */
    submission: (reference: string, headers: Record<string, string>) =>
      read((c) => c.getSubmission({ payoutId: reference }, { timeoutMs: opts.callTimeoutMs, headers }).then((r) => r.submission)),
    /** Every submission of a payout, whatever reference each came under (oldest first). */
    payoutSubmissions: (payoutId: string, headers: Record<string, string>) =>
      read((c) => c.listPayoutSubmissions({ payoutId }, { timeoutMs: opts.callTimeoutMs, headers }).then((r) => r.submissions)),
  };
}

export type ProxyReads = ReturnType<typeof createProxyReads>;
export type { Submission };
