/**
 * The invariants `railfence check` verifies, each as one SQL query over paydb and the rail's
 * statement (loaded into the session's temp table `audit_statement`, every ACCEPTED payment tied
 * to a payout in `audit_assigned`; see audit.ts). A query returns the rows that violate it, so
 * the report can name them. $1/$2 bound the window (intents and mark history created in
 * [since, until); payouts created OR changed in it, by paydb's own payout_history, so an old payout
 * rewritten today is judged today); payments are checked wherever their payout was created,
 * because a payment that arrives late for an old payout is exactly what an audit is for. $3 is the
 * in-flight age and $4 the longest a payout may stay open, in seconds.
 */

export interface InvariantQuery {
  name: string;
  /** What holding means, in one line (the report prints it). */
  rule: string;
  sql: string;
  /** Only in a quiescent check (the system was drained): open work is a violation. */
  quiescentOnly?: boolean;
}

const inWindow = (col: string) => `($1::timestamptz IS NULL OR ${col} >= $1) AND ($2::timestamptz IS NULL OR ${col} < $2)`;
/** The payout (alias `p`) was created or changed in the window. */
const payoutInWindow = (p: string) =>
  `((${inWindow(`${p}.created_at`)}) OR EXISTS (SELECT 1 FROM payout_history h WHERE h.payout_id = ${p}.payout_id AND ${inWindow("h.changed_at")}))`;
/** The longest claim paydb accepts (migration 012). */
export const LONGEST_CLAIM_SECONDS = 15 * 60;
const SAME_CONTENT = (a: string, b: string) =>
  `(${a}.account_id, ${a}.amount_minor, ${a}.currency, ${a}.beneficiary) = (${b}.account_id, ${b}.amount_minor, ${b}.currency, ${b}.beneficiary)`;

export const INVARIANT_QUERIES: readonly InvariantQuery[] = [
  {
    name: "INV-02",
    rule: "no payout is paid more than once on the rail, whatever the references",
    sql: `SELECT payout_id, count(*)::int AS payments, array_agg(rail_reference ORDER BY booked_at) AS rail_references,
                 array_agg(client_reference ORDER BY booked_at) AS references
            FROM audit_assigned WHERE payout_id IS NOT NULL GROUP BY payout_id HAVING count(*) > 1
          UNION ALL
          SELECT a.payout_id, 2, ARRAY[p.rail_reference, a.rail_reference], ARRAY['(recorded on the payout)', a.client_reference]
            FROM audit_assigned a JOIN payouts p ON p.payout_id = a.payout_id
           WHERE p.rail_reference IS NOT NULL AND p.rail_reference <> a.rail_reference
             AND NOT EXISTS (SELECT 1 FROM audit_statement s WHERE s.rail_reference = p.rail_reference)`,
  },
  {
    name: "UNMAPPED_PAYMENT",
    rule: "every accepted rail payment maps to a payout, by its reference or by what it pays",
    sql: `SELECT rail_reference, client_reference, account_id, amount_minor::text, currency, beneficiary FROM audit_assigned
           WHERE payout_id IS NULL AND candidates = 0`,
  },
  {
    name: "AMBIGUOUS_PAYMENT",
    rule: "a payment whose reference maps to no payout matches at most one payout by content",
    sql: `SELECT rail_reference, client_reference, candidate_ids FROM audit_assigned WHERE payout_id IS NULL AND candidates > 1`,
  },
  {
    name: "UNBOUND_REFERENCE",
    rule: "every accepted payment was made under a reference that maps to its payout",
    sql: `SELECT rail_reference, client_reference, payout_id AS matched_by_content FROM audit_assigned WHERE mapped_by = 'CONTENT'`,
  },
  {
    name: "PAYMENT_MISMATCH",
    rule: "a payment pays what its payout says: same account, amount, currency and beneficiary",
    sql: `SELECT a.rail_reference, a.client_reference, a.payout_id,
                 a.account_id, p.account_id AS payout_account_id, a.amount_minor::text, p.amount_minor::text AS payout_amount_minor,
                 a.currency, p.currency AS payout_currency, a.beneficiary, p.beneficiary AS payout_beneficiary
            FROM audit_assigned a JOIN payouts p ON p.payout_id = a.payout_id
           WHERE a.mapped_by = 'REFERENCE' AND NOT ${SAME_CONTENT("a", "p")}`,
  },
  {
    name: "PAID_REFERENCE",
    rule: "a PAID payout's rail_reference is a payment the rail booked for it",
    sql: `SELECT p.payout_id, p.rail_reference FROM payouts p
           WHERE p.state = 'PAID' AND ${payoutInWindow("p")}
             AND NOT EXISTS (SELECT 1 FROM audit_assigned a WHERE a.payout_id = p.payout_id AND a.rail_reference = p.rail_reference)`,
  },
  {
    name: "PAID_DESPITE_NOT_PAID",
    rule: "nothing the rail paid is FAILED, REJECTED, NOT_FORWARDED or resolved NOT_PAID",
    sql: `SELECT p.payout_id, 'payout ' || p.state AS recorded, a.rail_reference, a.client_reference
            FROM audit_assigned a JOIN payouts p ON p.payout_id = a.payout_id WHERE p.state = 'FAILED'
          UNION ALL
          SELECT i.bound_payout_id, 'submission ' || i.payout_id || ' ' || i.state, s.rail_reference, s.client_reference
            FROM rail_submissions i JOIN audit_statement s ON s.client_reference = i.payout_id AND s.status = 'ACCEPTED'
           WHERE i.state IN ('REJECTED', 'NOT_FORWARDED', 'RESOLVED_NOT_PAID')`,
  },
  {
    name: "INTENT_UNBOUND",
    rule: "every intent is bound to an existing payout with the same account, amount, currency and beneficiary",
    sql: `SELECT i.payout_id AS reference, i.bound_payout_id, i.payout_bound, p.payout_id IS NOT NULL AS payout_exists
            FROM rail_submissions i LEFT JOIN payouts p ON p.payout_id = i.bound_payout_id
           WHERE ${inWindow("i.created_at")} AND (NOT i.payout_bound OR p.payout_id IS NULL OR NOT ${SAME_CONTENT("i", "p")})`,
  },
  {
    name: "RAIL_STATUS_UNKNOWN",
    // Counted as neither paid nor refused: a status the rail protocol does not document may have
    // moved money (shared/domain/rail-status.ts), so a payout paid twice could hide behind one. A human reads it.
    rule: "every payment on the rail's statement has a status this build knows (ACCEPTED or REJECTED)",
    sql: `SELECT s.rail_reference, s.client_reference, s.mapped_payout AS payout_id, s.booked_at
            FROM audit_statement s WHERE s.status NOT IN ('ACCEPTED', 'REJECTED')`,
  },
  {
    name: "INTENT_FIRST",
    // (Not "recorded before the booking" by timestamps: the rail's clock is not ours.)
    rule: "every rail payment has an intent under its reference, paying the same thing",
    sql: `SELECT s.rail_reference, s.client_reference, s.status, i.payout_id IS NOT NULL AS intent_exists
            FROM audit_statement s LEFT JOIN rail_submissions i ON i.payout_id = s.client_reference
           WHERE i.payout_id IS NULL OR NOT ${SAME_CONTENT("s", "i")}`,
  },
  {
    name: "FENCE_ADVANCED",
    rule: "every admission advanced its account's mark: admitted tokens strictly increase per account",
    sql: `SELECT i.payout_id AS reference, i.account_id, i.fencing_token::text, i.mark_advanced FROM rail_submissions i
           WHERE ${inWindow("i.created_at")}
             AND (NOT i.mark_advanced OR NOT EXISTS (SELECT 1 FROM rail_high_water_log l WHERE l.account_id = i.account_id AND l.new_mark = i.fencing_token))`,
  },
  {
    name: "MARK_MONOTONIC",
    rule: "marks never decrease, the history has no gap, and the stored mark is the last advance",
    sql: `WITH h AS (
            SELECT account_id, id, old_mark, new_mark, lag(new_mark) OVER (PARTITION BY account_id ORDER BY id) AS prev
              FROM rail_high_water_log WHERE ${inWindow("logged_at")})
          SELECT account_id, 'went ' || prev || ' -> ' || new_mark AS problem FROM h WHERE prev IS NOT NULL AND new_mark <= prev
          UNION ALL
          SELECT account_id, 'history gap: ' || prev || ' then old mark ' || old_mark FROM h WHERE prev IS NOT NULL AND old_mark IS DISTINCT FROM prev
          UNION ALL
          SELECT m.account_id, 'stored mark ' || m.mark || ' is not the last advance ' || COALESCE(last.new_mark::text, 'none')
            FROM rail_high_water m
            LEFT JOIN LATERAL (SELECT new_mark FROM rail_high_water_log l WHERE l.account_id = m.account_id ORDER BY id DESC LIMIT 1) last ON true
           WHERE ${inWindow("m.updated_at")} AND last.new_mark IS DISTINCT FROM m.mark`,
  },
  {
    name: "OUTCOME_KNOWN",
    rule: "every intent's recorded outcome agrees with the rail; every intent has an outcome or is listed as unresolved",
    sql: `SELECT i.payout_id AS reference, i.state, i.rail_reference,
                 (SELECT count(*)::int FROM audit_statement s WHERE s.client_reference = i.payout_id AND s.status = 'ACCEPTED') AS rail_accepted
            FROM rail_submissions i
           WHERE ${inWindow("i.created_at")} AND (
                 (i.state = 'ACCEPTED' AND NOT EXISTS (SELECT 1 FROM audit_statement s WHERE s.client_reference = i.payout_id AND s.status = 'ACCEPTED' AND s.rail_reference = i.rail_reference))
              OR (i.state = 'RESOLVED_PAID' AND NOT EXISTS (SELECT 1 FROM audit_statement s WHERE s.client_reference = i.payout_id AND s.status = 'ACCEPTED')))`,
  },
  {
    name: "OUTCOME_KNOWN",
    rule: "after a drain, no intent is still being forwarded (older ones are ambiguous and listed)",
    quiescentOnly: true,
    sql: `SELECT i.payout_id AS reference, i.state, i.created_at FROM rail_submissions i
           WHERE ${inWindow("i.created_at")} AND i.state = 'FORWARDING' AND i.created_at >= now() - make_interval(secs => $3::float8)`,
  },
  {
    name: "UNFLAGGED",
    rule: "a late rail answer or a contradicted NOT_PAID verdict always flags its payout for a human",
    sql: `SELECT i.payout_id AS reference, 'late answer ' || i.late_answer_state || ' not flagged on the payout' AS problem
            FROM rail_submissions i JOIN payouts p ON p.payout_id = i.bound_payout_id
           WHERE i.late_answered_at IS NOT NULL AND p.attention_reason IS NULL
          UNION ALL
          SELECT i.payout_id, 'contradiction recorded but the payout is ' || p.state
            FROM rail_submissions i JOIN payouts p ON p.payout_id = i.bound_payout_id
           WHERE i.contradicted_at IS NOT NULL AND p.state <> 'NEEDS_ATTENTION'
          UNION ALL
          SELECT i.payout_id, 'resolved NOT_PAID, the rail paid it (' || s.rail_reference || '), and nothing recorded it'
            FROM rail_submissions i JOIN audit_statement s ON s.client_reference = i.payout_id AND s.status = 'ACCEPTED'
           WHERE i.state = 'RESOLVED_NOT_PAID' AND i.contradicted_at IS NULL AND i.late_answer_state IS DISTINCT FROM 'ACCEPTED'`,
  },
  {
    name: "PAYOUT_OPEN",
    rule: "after a drain, every payout is settled (PAID, FAILED, UNKNOWN and listed, or NEEDS_ATTENTION)",
    quiescentOnly: true,
    sql: `SELECT payout_id, state FROM payouts p WHERE ${payoutInWindow("p")} AND state IN ('PENDING', 'PROCESSING')`,
  },
  {
    name: "UNKNOWN_UNLISTED",
    rule: "an UNKNOWN payout has an ambiguous, unresolved submission (the reconciler's work list); else nothing will ever close it",
    sql: `SELECT p.payout_id, p.state, p.updated_at FROM payouts p
           WHERE p.state = 'UNKNOWN' AND ${payoutInWindow("p")}
             AND NOT EXISTS (SELECT 1 FROM rail_submissions i WHERE i.bound_payout_id = p.payout_id AND i.state IN ('TIMEOUT', 'FORWARDING'))`,
  },
  {
    name: "CLAIM_BOUNDED",
    rule: `a payout is claimed for at most ${LONGEST_CLAIM_SECONDS / 60} minutes (a longer claim hides it from every executor)`,
    sql: `SELECT p.payout_id, p.state, p.claimed_by, p.claimed_until FROM payouts p
           WHERE p.claimed_until > now() + make_interval(secs => ${LONGEST_CLAIM_SECONDS + 60})`,
  },
  {
    name: "PAYOUT_AGE",
    rule: "no payout stays open (PENDING, PROCESSING, UNKNOWN) longer than the configured age (--max-open-age)",
    sql: `SELECT p.payout_id, p.state, p.created_at FROM payouts p
           WHERE p.state IN ('PENDING', 'PROCESSING', 'UNKNOWN') AND p.created_at < now() - make_interval(secs => $4::float8)`,
  },
];

/** Every invariant name, in report order. */
export const INVARIANTS: readonly string[] = [...new Set(INVARIANT_QUERIES.map((q) => q.name))];
