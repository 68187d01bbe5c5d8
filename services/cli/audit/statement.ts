/**
 * Where the audit reads the rail's statement from. In production: rail-proxy's
 * GetRailStatement (the audit never holds the rail credential, ADR-007 D1). The harness may read
 * the stub's ledger directly, but only as a cross-check of this one.
 */
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PaymentStatus } from "../../shared/gen/railfence/rail/v1/rail_pb.js";
import type { RailProxyClient } from "../../shared/proxy-pool.js";

export interface StatementPayment {
  railReference: string;
  clientReference: string;
  accountId: string;
  beneficiary: string;
  amountMinor: bigint;
  currency: string;
  status: "ACCEPTED" | "REJECTED";
  bookedAt: Date;
  sequence: bigint;
}

/** Pages of the statement from `since` (inclusive), in statement order, ending at `until` if set. */
export type StatementSource = (since: Date | undefined, until: Date | undefined) => AsyncIterable<StatementPayment[]>;

/** The statement through rail-proxy, `pageSize` payments at a time. */
export function proxyStatement(proxy: () => RailProxyClient, opts: { timeoutMs: number; pageSize?: number }): StatementSource {
  return async function* pages(since, until) {
    let afterSequence = 0n;
    for (;;) {
      const page = await proxy().getRailStatement(
        { since: since ? timestampFromDate(since) : undefined, afterSequence, pageSize: opts.pageSize ?? 1000 },
        { timeoutMs: opts.timeoutMs },
      );
      const payments: StatementPayment[] = [];
      for (const p of page.payments) {
        if (p.sequence > afterSequence) afterSequence = p.sequence;
        const bookedAt = p.bookedAt ? timestampDate(p.bookedAt) : new Date(0);
        if (until && bookedAt >= until) continue;
        payments.push({
          railReference: p.railReference,
          clientReference: p.clientReference,
          accountId: p.accountId,
          beneficiary: p.beneficiary,
          amountMinor: p.amount?.amountMinor ?? 0n,
          currency: p.amount?.currency ?? "",
          status: p.status === PaymentStatus.ACCEPTED ? "ACCEPTED" : "REJECTED",
          bookedAt,
          sequence: p.sequence,
        });
      }
      if (payments.length) yield payments;
      // Statement order is booking order (up to concurrent bookings): a page wholly past
      // `until` means nothing later is wanted.
      if (!page.hasMore || page.payments.length === 0 || (until && payments.length === 0)) return;
    }
  };
}
