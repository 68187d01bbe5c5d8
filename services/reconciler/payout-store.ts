/**
 * paydb access of the reconciler. It reads payouts and writes none (decision 066): a resolution
 * closes its payout in rail-proxy's own statement. The one payout fact the reconciler still owns,
 * a rail payment with no intent on the ledger, goes through paydb's payout_paid_without_intent,
 * which can make that one move and nothing else. The only layer of the reconciler that knows SQL.
 */
import type { Pool } from "../shared/db/pg.js";
import { int8 } from "../shared/domain/int8.js";

export function createReconcilerStore(pool: Pool) {
  return {
    /**
     * The rail paid this payout with no intent on the ledger: PAID when it was open, flagged
     * NEEDS_ATTENTION (PAID_BUT_FAILED) when the books say FAILED, untouched while one of its
     * submissions is ambiguous or when it is already closed. Returns the state it was left in,
     * or undefined when nothing changed.
     */
    async paidWithoutIntent(payoutId: string, railReference: string): Promise<string | undefined> {
      const { rows } = await pool.query<{ after: string | null }>("SELECT payout_paid_without_intent($1, $2) AS after", [payoutId, railReference]);
      return rows[0]?.after ?? undefined;
    },

    /** Which of these ids are payouts. */
    async existingPayouts(ids: readonly string[]): Promise<Set<string>> {
      const { rows } = await pool.query<{ payout_id: string }>("SELECT payout_id FROM payouts WHERE payout_id = ANY($1)", [ids]);
      return new Set(rows.map((r) => r.payout_id));
    },

    /** These payouts' state, rail reference and what they pay, by id (absent ids are not payouts). */
    async payoutsByIds(ids: readonly string[]): Promise<Map<string, PayoutRecord>> {
      if (ids.length === 0) return new Map();
      const { rows } = await pool.query<{
        payout_id: string;
        state: string;
        rail_reference: string | null;
        account_id: string;
        amount_minor: string;
        currency: string;
        beneficiary: string;
      }>("SELECT payout_id, state, rail_reference, account_id, amount_minor::text, currency, beneficiary FROM payouts WHERE payout_id = ANY($1)", [ids]);
      return new Map(
        rows.map((r) => [
          r.payout_id,
          {
            state: r.state,
            railReference: r.rail_reference ?? "",
            accountId: r.account_id,
            amountMinor: int8(r.amount_minor),
            currency: r.currency,
            beneficiary: r.beneficiary,
          },
        ]),
      );
    },

    /**
     * A pass finished (decision 061): the one row of reconciler_last_pass (migration 018), by
     * paydb's clock. The CronJob's own /metrics is gone before a scrape; payouts exports this.
     */
    async recordPass(): Promise<void> {
      await pool.query(
        `INSERT INTO reconciler_last_pass AS p (singleton, pass_at) VALUES (true, now())
         ON CONFLICT (singleton) DO UPDATE SET pass_at = GREATEST(p.pass_at, EXCLUDED.pass_at), passes = p.passes + 1`,
      );
    },
  };
}

export interface PayoutRecord {
  state: string;
  railReference: string;
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
}

export type ReconcilerStore = ReturnType<typeof createReconcilerStore>;
