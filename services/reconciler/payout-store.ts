/**
 * paydb writes of the reconciler: a resolved submission closes its payout. The only layer of the
 * reconciler that knows SQL. A payout already PAID, FAILED or NEEDS_ATTENTION is never touched,
 * so running the reconciler twice (or beside a human with the CLI) changes nothing the second time.
 */
import type { Pool } from "../shared/pg.js";

export function createReconcilerStore(pool: Pool) {
  return {
    /** Money moved for the payout (whichever of its submissions moved it). Returns true when the row changed. */
    // [rule:payout-after-resolve]
    async markPaid(payoutId: string, railReference: string): Promise<boolean> {
      const res = await pool.query(
        `UPDATE payouts SET state = 'PAID', rail_reference = $2, failure_reason = NULL,
                claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE payout_id = $1 AND state IN ('UNKNOWN', 'PROCESSING', 'PENDING')`,
        [payoutId, railReference || null],
      );
      return res.rowCount === 1;
    },

    /**
     * The rail paid a payout the books say FAILED (a wrong verdict, or a write nobody should have
     * made): the refused PAID write is never dropped, the payout goes to a human. A FAILED payout
     * invites its client to create a new one: a second payment at the business level. Returns
     * true when the row was flagged.
     */
    async flagPaidButFailed(payoutId: string, railReference: string): Promise<boolean> {
      const res = await pool.query(
        `UPDATE payouts SET state = 'NEEDS_ATTENTION', attention_reason = 'PAID_BUT_FAILED',
                attention_detail = 'the rail paid it (' || $2 || ') but the payout was FAILED', attention_at = now(), updated_at = now()
          WHERE payout_id = $1 AND state = 'FAILED'`,
        [payoutId, railReference || "no reference"],
      );
      return res.rowCount === 1;
    },

    /**
     * A submission that did not pay fails its payout only if nobody fenced the payout with a newer
     * token since (fence <= the submission's token): a newer holder's attempt is its own business.
     */
    async markFailed(payoutId: string, submissionToken: bigint, reason: string): Promise<boolean> {
      const res = await pool.query(
        `UPDATE payouts SET state = 'FAILED', failure_reason = $3,
                claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE payout_id = $1 AND state IN ('UNKNOWN', 'PROCESSING', 'PENDING') AND fence <= $2`,
        [payoutId, submissionToken.toString(), reason],
      );
      return res.rowCount === 1;
    },
    // [/rule:payout-after-resolve]

    /**
     * A payout left UNKNOWN whose only submission did not pay, whatever its fence: the holder that
     * recorded UNKNOWN (possibly under a newer token than the submission's, after finding it still
     * open) is done with it, and nothing can pay it any more: an UNKNOWN payout cannot be fenced,
     * so the proxy's binding admits no new submission for it, and one live submission per payout
     * means the one just closed was the only one. A PROCESSING payout under a newer fence is a
     * holder at work and is never touched here.
     */
    // [rule:payout-unknown-failed]
    async failUnknown(payoutId: string, reason: string): Promise<boolean> {
      const res = await pool.query(
        `UPDATE payouts SET state = 'FAILED', failure_reason = $2,
                claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE payout_id = $1 AND state = 'UNKNOWN'`,
        [payoutId, reason],
      );
      return res.rowCount === 1;
    },
    // [/rule:payout-unknown-failed]

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
            amountMinor: BigInt(r.amount_minor),
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

    /** UNKNOWN payouts, oldest first: some may belong to submissions closed elsewhere. */
    async listUnknown(limit: number): Promise<string[]> {
      const { rows } = await pool.query<{ payout_id: string }>(
        "SELECT payout_id FROM payouts WHERE state = 'UNKNOWN' ORDER BY updated_at, payout_id LIMIT $1",
        [limit],
      );
      return rows.map((r) => r.payout_id);
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
