/**
 * Where the audit reads the rail's statement from. In production: rail-proxy's
 * GetRailStatement (the audit never holds the rail credential, ADR-007 D1). The harness may read
 * the stub's ledger directly, but only as a cross-check of this one.
 */
import type { RailProxyClient } from "../../shared/rpc/proxy-pool.js";
import { statementPages, type StatementEntry } from "../../shared/domain/rail-statement.js";

/** A payment on the statement (shared/domain/rail-statement.ts: the reconciler reads the same entries). */
export type StatementPayment = Omit<StatementEntry, "reason">;

/** Pages of the statement from `since` (inclusive), in statement order, ending at `until` if set. */
export type StatementSource = (since: Date | undefined, until: Date | undefined) => AsyncIterable<StatementPayment[]>;

/** The statement through rail-proxy, `pageSize` payments at a time. */
export function proxyStatement(proxy: () => RailProxyClient, opts: { timeoutMs: number; pageSize?: number }): StatementSource {
  return async function* pages(since, until) {
    for await (const page of statementPages((req) => proxy().getRailStatement(req, { timeoutMs: opts.timeoutMs }), since, opts.pageSize ?? 1000)) {
      const payments = page.entries.filter((p) => !until || p.bookedAt < until);
      if (payments.length) yield payments;
      // Statement order is booking order (up to concurrent bookings): a page wholly past
      // `until` means nothing later is wanted.
      if (until && payments.length === 0 && page.entries.length > 0) return;
    }
  };
}
