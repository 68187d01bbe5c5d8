/**
 * The executor's reads at rail-proxy: a submission by its reference, every submission of a
 * payout, and the rail's statement. Reads are safe to ask again (on another replica), so each is retried a few times; a
 * read that still fails says so and the caller changes nothing (a failed lookup never moves any
 * bookkeeping: the money-safety review's reproduction 2a).
 */
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Payment } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import type { Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { payoutIdOf } from "../shared/domain/submission-ref.js";
import type { ProxyPool } from "./clients.js";
import { jitter, sleep } from "./timing.js";

const belongsTo = (clientReference: string, payoutId: string) => payoutIdOf(clientReference) === payoutId;

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
    /**
     * The rail's own statement (through the proxy, the only credential holder) from `since`:
     * every payment of the payout, under any of its references, and how far the statement is
     * complete. Read whole, page by page; undefined when a page could not be read.
     */
    async railPaymentsOf(payoutId: string, since: Date, headers: Record<string, string>): Promise<Lookup<{ payments: Payment[]; coveredUntil: Date }>> {
      const payments: Payment[] = [];
      let coveredUntil: Date | undefined;
      let after = 0n;
      for (let page = 0; page < 10_000; page++) {
        const got = await read((c) =>
          c.getRailStatement({ since: timestampFromDate(since), afterSequence: after, pageSize: 1000 }, { timeoutMs: opts.callTimeoutMs, headers }),
        );
        if (got.kind !== "found") return got.kind === "not_found" ? { kind: "error", error: new Error("statement not found") } : got;
        // The first page's coverage: later pages were read later, and may cover more than the first.
        coveredUntil ??= got.value.coveredUntil ? timestampDate(got.value.coveredUntil) : new Date(0);
        payments.push(...got.value.payments.filter((p) => belongsTo(p.clientReference, payoutId)));
        if (!got.value.hasMore || got.value.payments.length === 0) break;
        after = got.value.payments.at(-1)!.sequence;
      }
      return { kind: "found", value: { payments, coveredUntil: coveredUntil ?? new Date(0) } };
    },
    // [rule:executor-list-submissions]
    /** Every submission of a payout, whatever reference each came under (oldest first). */
    payoutSubmissions: (payoutId: string, headers: Record<string, string>) =>
      read((c) => c.listPayoutSubmissions({ payoutId }, { timeoutMs: opts.callTimeoutMs, headers }).then((r) => r.submissions)),
    // [/rule:executor-list-submissions]
  };
}

export type ProxyReads = ReturnType<typeof createProxyReads>;
export type { Submission };
