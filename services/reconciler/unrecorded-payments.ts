/**
 * The reconciler's fourth pass: rail payments that name one of our payouts but have no intent on
 * the proxy's ledger (INTENT_FIRST broken). That happens only when paydb lost what it had
 * acknowledged: a failover to a standby that had not received the last commits, or a restore to
 * an earlier point (docs/decisions/024, 036). The rail paid; paydb forgot it asked.
 *
 * The payment is taken as what it is, proof that money moved for that payout: an open payout
 * (PENDING, PROCESSING, UNKNOWN) becomes PAID from it, so no executor that claims it next pays it
 * again; a FAILED payout goes to a human (PAID_BUT_FAILED). Every such payment is flagged: an
 * error log naming the payout and the payment, a counter that pages, and the audit keeps listing
 * it under INTENT_FIRST. A payment whose content is not the payout's, or whose status the rail
 * protocol does not document, is never taken as the payout's: it is flagged for a human only.
 *
 * Cheap in the common case: a payment whose payout is PAID with that very rail reference is
 * consistent and costs no call; only the others are checked against the proxy's ledger
 * (ListPayoutSubmissions), one call per payout.
 */
import type { Logger } from "../shared/process/logger.js";
import { contentDifferences } from "../shared/domain/payment-match.js";
import { payoutIdOf } from "../shared/domain/submission-ref.js";
import type { RailProxyClient } from "../shared/rpc/proxy-pool.js";
import { statementPages, type StatementEntry } from "../shared/domain/rail-statement.js";
import type { ReconcilerStore } from "./payout-store.js";
import type { ReconcilerMetrics } from "./reconciler-metrics.js";

export interface UnrecordedDeps {
  proxy: () => RailProxyClient;
  store: ReconcilerStore;
  metrics: ReconcilerMetrics;
  logger: Logger;
  /** Payments booked since now - this are looked at (0: the pass is off). */
  watchMs: number;
  callTimeoutMs: number;
  now: () => Date;
  /** Marks the payout PAID (or flags PAID_BUT_FAILED): the reconciler's one way to say "money moved". */
  markPaid: (payoutId: string, railReference: string) => Promise<boolean>;
}

export interface UnrecordedResult {
  /** Payments with no intent found this run (each flagged). */
  found: number;
  /** Of those, payouts this run closed PAID (or flagged PAID_BUT_FAILED) from them. */
  applied: number;
  read: number;
}

export async function findUnrecordedPayments(deps: UnrecordedDeps): Promise<UnrecordedResult> {
  const opts = { timeoutMs: deps.callTimeoutMs };
  const since = new Date(deps.now().getTime() - deps.watchMs);
  const candidates: StatementEntry[] = [];
  for await (const page of statementPages((req) => deps.proxy().getRailStatement(req, opts), since)) candidates.push(...page.entries);
  const read = candidates.length;
  const payouts = await deps.store.payoutsByIds([...new Set(candidates.map((p) => payoutIdOf(p.clientReference)))]);
  const result: UnrecordedResult = { found: 0, applied: 0, read };
  const ledger = new Map<string, { refs: Set<string>; ambiguous: boolean; truncated: boolean }>();
  for (const p of candidates) {
    const payoutId = payoutIdOf(p.clientReference);
    const payout = payouts.get(payoutId);
    // A payment naming no payout of ours is the audit's (UNMAPPED_PAYMENT), not this pass's.
    if (!payout) continue;
    if (payout.state === "PAID" && payout.railReference === p.railReference) continue;
    let known = ledger.get(payoutId);
    if (!known) {
      const listed = await deps.proxy().listPayoutSubmissions({ payoutId }, opts);
      known = {
        refs: new Set(listed.submissions.map((s) => s.payoutId)),
        ambiguous: listed.submissions.some((s) => s.ambiguous),
        // The proxy lists at most 100 submissions of a payout: beyond that, absence proves nothing.
        truncated: listed.submissions.length >= 100,
      };
      ledger.set(payoutId, known);
    }
    if (known.refs.has(p.clientReference) || known.truncated) continue;

    result.found++;
    deps.metrics.unrecordedPayments.inc();
    const status = p.status;
    const differs = contentDifferences(p, payout);
    const line = {
      event: "payment_without_intent",
      payout_id: payoutId,
      client_reference: p.clientReference,
      rail_reference: p.railReference,
      rail_status: status,
      payout_state: payout.state,
      content_differs: differs,
    };
    if (status !== "ACCEPTED" || differs.length > 0) {
      deps.logger.error(
        line,
        "the rail booked a payment under this payout's name that paydb has no intent for, and it is not this payout's payment; it needs a human",
      );
      continue;
    }
    // A payout with an ambiguous submission is the first pass's (a payment under another reference
    // makes it HUMAN there): flagged here, never closed behind the human's back.
    const applied = payout.state !== "PAID" && !known.ambiguous && (await deps.markPaid(payoutId, p.railReference));
    if (applied) result.applied++;
    deps.logger.error(
      { ...line, applied },
      payout.state === "PAID"
        ? "the rail paid this payout again with no intent on the ledger: a double payment; it needs a human"
        : "the rail paid this payout with no intent on the ledger (paydb lost what it had acknowledged); the payout is taken as paid and flagged",
    );
  }
  return result;
}
