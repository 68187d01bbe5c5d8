/**
 * paydb writes of the reconciler: a resolved ambiguous submission closes its payout. The only
 * layer of the reconciler that knows SQL. A payout already PAID or FAILED is never touched, so
 * running the reconciler twice (or beside a human with the CLI) changes nothing the second time.
 */
import type { Pool } from "../shared/pg.js";
import { payoutIdOf } from "../shared/submission-ref.js";

export function createReconcilerStore(pool: Pool) {
  return {
    /** Returns true when the payout row changed. */
    /** `ref` is the submission's reference (the payout id, or an attempt reference of it).
     * Money moved for the payout whichever attempt moved it: PAID applies to any attempt. */
    async markPaid(ref: string, railReference: string): Promise<boolean> {
      const payoutId = payoutIdOf(ref);
      const res = await pool.query(
        `UPDATE payouts SET state = 'PAID', rail_reference = $2, failure_reason = NULL,
                claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE payout_id = $1 AND state IN ('UNKNOWN', 'PROCESSING', 'PENDING')`,
        [payoutId, railReference || null],
      );
      return res.rowCount === 1;
    },

    /** FAILED applies only when `ref` is the attempt the payout is waiting on: an older attempt
     * that did not pay says nothing about a newer one still in flight. */
    async markFailed(ref: string, reason: string): Promise<boolean> {
      const res = await pool.query(
        `UPDATE payouts SET state = 'FAILED', failure_reason = $2,
                claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE payout_id = $1 AND state IN ('UNKNOWN', 'PROCESSING', 'PENDING')
            AND (submission_ref IS NULL OR submission_ref = $3)`,
        [payoutIdOf(ref), reason, ref],
      );
      return res.rowCount === 1;
    },

    /** UNKNOWN payouts, oldest first: some may belong to submissions closed elsewhere. */
    async listUnknown(limit: number): Promise<string[]> {
      const { rows } = await pool.query<{ payout_id: string }>(
        `SELECT COALESCE(submission_ref, payout_id) AS payout_id FROM payouts WHERE state = 'UNKNOWN' ORDER BY updated_at, payout_id LIMIT $1`,
        [limit],
      );
      // The references of the attempts these payouts wait on.
      return rows.map((r) => r.payout_id);
    },
  };
}

export type ReconcilerStore = ReturnType<typeof createReconcilerStore>;
