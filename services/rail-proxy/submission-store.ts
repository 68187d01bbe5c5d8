/**
 * paydb access for rail-proxy: the high-water mark and the intent ledger. The only layer that
 * knows SQL. Admission is ONE statement (one round trip, one implicit transaction):
 *
 *   WITH advanced AS (INSERT INTO rail_high_water .. ON CONFLICT DO UPDATE .. WHERE mark < $token)
 *   INSERT INTO rail_submissions .. SELECT .. FROM advanced
 *
 * - token <= mark: `advanced` is empty, nothing is inserted, 0 rows -> FENCED_OUT;
 * - payout already submitted: the intent insert violates the primary key, the whole statement
 *   (mark advance included) rolls back -> DUPLICATE_SUBMISSION, nothing changed;
 * - otherwise mark and intent commit together, before the rail is called.
 * The mark is never read into the process and never cached (ADR-007 failures i-iii).
 */
import type { Pool } from "../shared/pg.js";

export type SubmissionStateName = "FORWARDING" | "ACCEPTED" | "REJECTED" | "TIMEOUT" | "RESOLVED_PAID" | "RESOLVED_NOT_PAID";

export interface SubmissionRow {
  payout_id: string;
  account_id: string;
  fencing_token: string;
  amount_minor: string;
  currency: string;
  beneficiary: string;
  state: SubmissionStateName;
  rail_reference: string | null;
  rail_reason: string | null;
  replica_id: string;
  mark_advanced: boolean;
  created_at: Date;
  updated_at: Date;
  ambiguity_cause: string | null;
  previous_state: SubmissionStateName | null;
  resolution_outcome: "PAID" | "NOT_PAID" | null;
  resolution_actor: string | null;
  resolution_note: string | null;
  resolved_at: Date | null;
  ambiguous: boolean;
  cursor: string;
}

export interface Intent {
  accountId: string;
  payoutId: string;
  token: bigint;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
  replicaId: string;
}

export type AdmitResult = "ADMITTED" | "FENCED_OUT" | "DUPLICATE";

const ADVANCE_MARK = `
  INSERT INTO rail_high_water AS h (account_id, mark) VALUES ($1, $2)
  ON CONFLICT (account_id) DO UPDATE SET mark = EXCLUDED.mark, updated_at = now()
  WHERE h.mark < EXCLUDED.mark
  RETURNING mark`;

const ADMIT_FENCED = `
  WITH advanced AS (${ADVANCE_MARK})
  INSERT INTO rail_submissions
    (payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced)
  SELECT $3, $1, $2, $4, $5, $6, 'FORWARDING', $7, true FROM advanced`;

/** D7 harness-only variant: step 1 skipped. The mark still advances when it can, but admission
 * no longer depends on it; mark_advanced records whether it did, for the drill checker. */
const ADMIT_UNFENCED = `
  WITH advanced AS (${ADVANCE_MARK})
  INSERT INTO rail_submissions
    (payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced)
  VALUES ($3, $1, $2, $4, $5, $6, 'FORWARDING', $7, (SELECT count(*) FROM advanced) > 0)`;

const RECORD_OUTCOME = `
  UPDATE rail_submissions
     SET state = $2, rail_reference = $3, rail_reason = $4, ambiguity_cause = $5, updated_at = now(),
         answered_at = CASE WHEN $2 IN ('ACCEPTED', 'REJECTED') THEN now() END
   WHERE payout_id = $1
     AND (state = 'FORWARDING' OR (state = 'TIMEOUT' AND ambiguity_cause = 'STALE_FORWARDING'))`;

/** The exact statements of the admission path, for the benchmark's raw floor (B0). */
export const ADMISSION_SQL = { admit: ADMIT_FENCED, recordOutcome: RECORD_OUTCOME } as const;

const SELECT_COLUMNS = (ambiguousAfterSeconds: string) => `*,
  (state = 'TIMEOUT' OR (state = 'FORWARDING' AND created_at < now() - make_interval(secs => ${ambiguousAfterSeconds}))) AS ambiguous,
  created_at::text AS cursor`;

export function createSubmissionStore(pool: Pool, ambiguousAfterMs: number) {
  const ambiguousAfterSeconds = (ambiguousAfterMs / 1000).toFixed(3);
  const columns = SELECT_COLUMNS(ambiguousAfterSeconds);
  const isAmbiguous = `(state = 'TIMEOUT' OR (state = 'FORWARDING' AND created_at < now() - make_interval(secs => ${ambiguousAfterSeconds})))`;

  return {
    /** Steps 1-3 of C3 §3.5 in one statement. */
    async admit(i: Intent, fencingEnabled: boolean): Promise<AdmitResult> {
      try {
        // Named: prepared once per connection, so each admission skips parse and plan.
        const res = await pool.query({
          name: fencingEnabled ? "rf_admit_fenced" : "rf_admit_unfenced",
          text: fencingEnabled ? ADMIT_FENCED : ADMIT_UNFENCED,
          values: [i.accountId, i.token.toString(), i.payoutId, i.amountMinor.toString(), i.currency, i.beneficiary, i.replicaId],
        });
        return res.rowCount === 1 ? "ADMITTED" : "FENCED_OUT";
      } catch (err) {
        const e = err as { code?: string; constraint?: string };
        if (e.code === "23505" && e.constraint === "rail_submissions_pkey") return "DUPLICATE";
        throw err;
      }
    },

    /** Records the rail's answer (or its absence) on a row this replica is forwarding. A row the
     * sweeper already declared stale-ambiguous still takes the late answer: it is the rail's truth. */
    async recordOutcome(payoutId: string, state: "ACCEPTED" | "REJECTED" | "TIMEOUT", railReference: string | null, railReason: string | null, ambiguityCause: string | null): Promise<SubmissionRow | undefined> {
      const { rows } = await pool.query<SubmissionRow>({
        name: "rf_record_outcome",
        text: `${RECORD_OUTCOME} RETURNING ${columns}`,
        values: [payoutId, state, railReference, railReason, ambiguityCause],
      });
      return rows[0];
    },

    async get(payoutId: string): Promise<SubmissionRow | undefined> {
      const { rows } = await pool.query<SubmissionRow>(`SELECT ${columns} FROM rail_submissions WHERE payout_id = $1`, [payoutId]);
      return rows[0];
    },

    /** Ambiguous rows, oldest first, keyset-paged on (created_at, payout_id). */
    async listUnresolved(limit: number, after?: { cursor: string; payoutId: string }): Promise<SubmissionRow[]> {
      const { rows } = await pool.query<SubmissionRow>(
        `SELECT ${columns} FROM rail_submissions
          WHERE state IN ('FORWARDING', 'TIMEOUT') AND ${isAmbiguous}
            AND ($2::timestamptz IS NULL OR (created_at, payout_id) > ($2::timestamptz, $3::text))
          ORDER BY created_at, payout_id LIMIT $1`,
        [limit, after?.cursor ?? null, after?.payoutId ?? ""],
      );
      return rows;
    },

    /** Closes an ambiguous row. Returns undefined when the row is not ambiguous (or absent). */
    async resolve(payoutId: string, outcome: "PAID" | "NOT_PAID", actor: string, note: string): Promise<SubmissionRow | undefined> {
      const { rows } = await pool.query<SubmissionRow>(
        `UPDATE rail_submissions
            SET previous_state = state,
                state = CASE WHEN $2 = 'PAID' THEN 'RESOLVED_PAID' ELSE 'RESOLVED_NOT_PAID' END,
                resolution_outcome = $2, resolution_actor = $3, resolution_note = $4,
                resolved_at = now(), updated_at = now()
          WHERE payout_id = $1 AND ${isAmbiguous}
          RETURNING ${columns}`,
        [payoutId, outcome, actor, note],
      );
      return rows[0];
    },

    /** Turns FORWARDING rows whose replica must have died into TIMEOUT. Never forwards. */
    async sweepStaleForwarding(): Promise<number> {
      const res = await pool.query(
        `UPDATE rail_submissions SET state = 'TIMEOUT', ambiguity_cause = 'STALE_FORWARDING', updated_at = now()
          WHERE state = 'FORWARDING' AND created_at < now() - make_interval(secs => ${ambiguousAfterSeconds})`,
      );
      return res.rowCount ?? 0;
    },

    async countUnresolved(): Promise<{ count: number; oldestAgeSeconds: number }> {
      const { rows } = await pool.query<{ count: string; oldest: number | null }>(
        `SELECT count(*) AS count, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest
           FROM rail_submissions WHERE state IN ('FORWARDING', 'TIMEOUT') AND ${isAmbiguous}`,
      );
      return { count: Number(rows[0]?.count ?? 0), oldestAgeSeconds: rows[0]?.oldest ?? 0 };
    },

    async isPrimary(): Promise<boolean> {
      const { rows } = await pool.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r");
      return rows[0]?.r === false;
    },
  };
}

export type SubmissionStore = ReturnType<typeof createSubmissionStore>;
