/**
 * The one reader of the rail's statement (GetRailStatement, through rail-proxy: the only holder of
 * the rail credential). The reconciler and the audit read the same pages into the same entries:
 * paged by sequence from `since`, each payment's status read once (rail-status.ts: a status the
 * rail protocol does not document is UNKNOWN, never "rejected"), and the statement's coverage
 * taken from the first page (later pages continue by sequence from a snapshot that already held
 * everything booked before it, so the first page's instant is the conservative one).
 */
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Payment } from "../gen/railfence/rail/v1/rail_pb.js";
import { readRailStatus, type RailStatusReading } from "./rail-status.js";

export interface StatementEntry {
  railReference: string;
  clientReference: string;
  accountId: string;
  beneficiary: string;
  amountMinor: bigint;
  currency: string;
  /** ACCEPTED: money moved; REJECTED: refused, final; UNKNOWN: a status this build does not know (proves nothing). */
  status: RailStatusReading;
  reason: string;
  bookedAt: Date;
  sequence: bigint;
}

/** One GetRailStatement call (the caller brings its client, deadline and headers). */
export type StatementPageReader = (req: { since?: Timestamp; afterSequence: bigint; pageSize: number }) => Promise<{
  payments: Payment[];
  hasMore: boolean;
  coveredUntil?: Timestamp;
}>;

export function statementEntry(p: Payment): StatementEntry {
  return {
    railReference: p.railReference,
    clientReference: p.clientReference,
    accountId: p.accountId,
    beneficiary: p.beneficiary,
    amountMinor: p.amount?.amountMinor ?? 0n,
    currency: p.amount?.currency ?? "",
    status: readRailStatus(p.status),
    reason: p.reason,
    bookedAt: p.bookedAt ? timestampDate(p.bookedAt) : new Date(0),
    sequence: p.sequence,
  };
}

/** The statement from `since` (inclusive; undefined: from the start), page by page, with the first page's coverage. */
export async function* statementPages(
  read: StatementPageReader,
  since: Date | undefined,
  pageSize = 1000,
): AsyncGenerator<{ entries: StatementEntry[]; coveredUntil: Date }> {
  let afterSequence = 0n;
  let coveredUntil: Date | undefined;
  for (;;) {
    const page = await read({ since: since ? timestampFromDate(since) : undefined, afterSequence, pageSize });
    coveredUntil ??= page.coveredUntil ? timestampDate(page.coveredUntil) : new Date(0);
    for (const p of page.payments) if (p.sequence > afterSequence) afterSequence = p.sequence;
    yield { entries: page.payments.map(statementEntry), coveredUntil };
    if (!page.hasMore || page.payments.length === 0) return;
  }
}
