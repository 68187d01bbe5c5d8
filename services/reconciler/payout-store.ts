/**
 * paydb writes of the reconciler: a resolved submission closes its payout. The only layer of the
 * reconciler that knows SQL. A payout already PAID, FAILED or NEEDS_ATTENTION is never touched,
 * so running the reconciler twice (or beside a human with the CLI) changes nothing the second time.
 */
import type { Pool } from "../shared/pg.js";

export function createReconcilerStore(pool: Pool) {
  return {
    /** Money moved for the payout (whichever of its submissions moved it). Returns true when the row changed. */
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

    /** Which of these ids are payouts. */
    async existingPayouts(ids: readonly string[]): Promise<Set<string>> {
      const { rows } = await pool.query<{ payout_id: string }>("SELECT payout_id FROM payouts WHERE payout_id = ANY($1)", [ids]);
      return new Set(rows.map((r) => r.payout_id));
    },

    /** UNKNOWN payouts, oldest first: some may belong to submissions closed elsewhere. */
    async listUnknown(limit: number): Promise<string[]> {
      const { rows } = await pool.query<{ payout_id: string }>("SELECT payout_id FROM payouts WHERE state = 'UNKNOWN' ORDER BY updated_at, payout_id LIMIT $1", [limit]);
      return rows.map((r) => r.payout_id);
    },
  };
}

export type ReconcilerStore = ReturnType<typeof createReconcilerStore>;
