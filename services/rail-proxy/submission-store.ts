/**
 * paydb access for rail-proxy: the high-water mark and the intent ledger. The only layer that
 * knows SQL. Admission is ONE statement, `SELECT * FROM rail_admit(...)` (one round trip, one
 * implicit transaction; the function is migrations/paydb/019_admission_without_switches.sql, every
 * guard unconditional):
 *
 * - the payout binding (SPEC C3 §3.9): the payout exists, same account/amount/currency/
 *   beneficiary, PROCESSING, fence = token; else a refusal, nothing written;
 * - step 1, the mark: INSERT .. ON CONFLICT DO UPDATE .. WHERE mark < $token; not advanced:
 *   FENCED_OUT, nothing written;
 * - steps 2-3, the intent: a second submission under the same reference violates the primary
 *   key (DUPLICATE), a second live submission of the payout violates the one-live index
 *   (PAYOUT_ALREADY_SUBMITTED); either way the whole statement, mark included, rolls back.
 * The mark is never read into the process and never cached (ADR-007 failures i-iii).
 *
 * Group admission (decision 068): with batching on, the admissions that arrive while earlier ones
 * are in paydb leave together as ONE statement, `rail_admit_batch(...)` (migration 023): each item
 * is rail_admit in its own subtransaction, in order, so each keeps its own outcome. Outcomes are
 * recorded the same way, one UPDATE for the batch.
 */
import { isRowRefusal, type Pool } from "../shared/db/pg.js";
import { againAfterDeadlock, groupCommit, orderBy, type Grouped } from "../shared/db/group-commit.js";

export type SubmissionStateName = "FORWARDING" | "ACCEPTED" | "REJECTED" | "TIMEOUT" | "RESOLVED_PAID" | "RESOLVED_NOT_PAID" | "NOT_FORWARDED";

export interface SubmissionRow {
  payout_id: string;
  bound_payout_id: string;
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
  late_answer_state: "ACCEPTED" | "REJECTED" | null;
  late_rail_reference: string | null;
  late_rail_reason: string | null;
  late_answered_at: Date | null;
  contradicted_at: Date | null;
  contradicting_rail_reference: string | null;
  contradiction_actor: string | null;
  reopened_at: Date | null;
  reopen_actor: string | null;
  reopen_reason: string | null;
  ambiguous: boolean;
  cursor: string;
  /** Set by the outcome statement only: it closed the payout PAID (decision 072). */
  payout_closed?: boolean;
}

/** A resolved row, with the state the same statement moved its payout to (null: left as it was). */
export interface ResolvedRow extends SubmissionRow {
  payout_state: string | null;
}

export interface Intent {
  /** The reference the caller presented (the ledger's primary key). */
  reference: string;
  /** The payout it pays (shared/domain/submission-ref.ts). */
  payoutId: string;
  accountId: string;
  token: bigint;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
  replicaId: string;
}

/** Which guards an admission statement applies. rail_admit: all of them, always. */
export interface StatementGuards {
  mark: boolean;
  binding: boolean;
  oneLive: boolean;
}

/**
 * The admission statement: production's is RAIL_ADMIT. A harness negative control builds the
 * store with its own (tools/harness/controls/rail-proxy.ts), calling SQL it installed into its
 * throwaway paydb; the product has no switch to turn a guard off.
 */
export interface AdmissionStatement {
  query(i: Intent): { name: string; text: string; values: unknown[] };
  /** The same statement for a group of intents (one row per item: ord, outcome, detail), or
   * undefined when it has no group form (then every admission is its own statement). */
  batchQuery?(items: Intent[]): { name: string; text: string; values: unknown[] };
  /** What it enforces (the guard gauges and the start-up warning report it). */
  applies: StatementGuards;
}

export type AdmitResult =
  /** admittedAtMs: paydb's clock when the intent was committed (its created_at, epoch ms): the
   * sweeper measures from it, so the forward deadline is counted from it too (admission.ts). */
  | { kind: "ADMITTED"; admittedAtMs: number }
  | { kind: "FENCED_OUT" }
  | { kind: "DUPLICATE" }
  | { kind: "PAYOUT_ALREADY_SUBMITTED"; live: string | undefined }
  | { kind: "PAYOUT_NOT_FOUND" }
  | { kind: "PAYOUT_MISMATCH"; field: string }
  | { kind: "PAYOUT_NOT_PAYABLE"; state: string }
  | { kind: "PAYOUT_FENCE_MISMATCH"; holder: "NEWER" | "OLDER" };

// [rule:admit-call]
// now() is the transaction's start: the same instant the intent row's created_at takes, read on
// paydb's clock, which is the clock the sweeper and the reconciler judge the row by.
// [rule:d3-admit-call]
const ADMIT = "SELECT outcome, detail, (extract(epoch FROM now()) * 1000)::float8 AS admitted_at_ms FROM rail_admit($1, $2, $3, $4, $5, $6, $7, $8)";
// [/rule:admit-call]

/** The intent as the admission statement's first eight parameters. */
export function intentValues(i: Intent): unknown[] {
  return [i.reference, i.payoutId, i.accountId, i.token.toString(), i.amountMinor.toString(), i.currency, i.beneficiary, i.replicaId];
}

/** A group of intents as a group admission statement's eight array parameters (the replica is one). */
export function intentArrays(items: Intent[]): unknown[] {
  return [
    items.map((i) => i.reference),
    items.map((i) => i.payoutId),
    items.map((i) => i.accountId),
    items.map((i) => i.token.toString()),
    items.map((i) => i.amountMinor.toString()),
    items.map((i) => i.currency),
    items.map((i) => i.beneficiary),
    items[0]?.replicaId ?? "",
  ];
}

// [rule:group-admit-call]
const ADMIT_BATCH =
  "SELECT ord, outcome, detail, (extract(epoch FROM now()) * 1000)::float8 AS admitted_at_ms FROM rail_admit_batch($1, $2, $3, $4, $5, $6, $7, $8)";
// [/rule:group-admit-call]

/** Production's admission: rail_admit, every guard on. Named: prepared once per connection, so
 * each admission skips parse and plan. */
export const RAIL_ADMIT: AdmissionStatement = {
  query: (i) => ({ name: "rf_admit", text: ADMIT, values: intentValues(i) }),
  batchQuery: (items) => ({ name: "rf_admit_batch", text: ADMIT_BATCH, values: intentArrays(items) }),
  applies: { mark: true, binding: true, oneLive: true },
};

/** Group admission and group outcome writes (decision 068). undefined: every statement alone. */
export interface Batching {
  /** Most items in one statement. */
  maxBatch: number;
  /** Statements of a kind in paydb at once; what arrives meanwhile forms the next group. */
  maxInFlight: number;
  onAdmissionBatch?: (size: number) => void;
  onOutcomeBatch?: (size: number) => void;
}

/** What an admission statement answered for one intent, as the store's result. */
function admitResult(outcome: string, detail: string | null, admittedAtMs: number): AdmitResult {
  switch (outcome) {
    case "ADMITTED":
      return { kind: outcome, admittedAtMs: Number(admittedAtMs) };
    case "FENCED_OUT":
    case "PAYOUT_NOT_FOUND":
    case "DUPLICATE":
      return { kind: outcome };
    case "PAYOUT_ALREADY_SUBMITTED":
      return { kind: outcome, live: detail ?? undefined };
    case "PAYOUT_MISMATCH":
      return { kind: outcome, field: detail ?? "" };
    case "PAYOUT_NOT_PAYABLE":
      return { kind: outcome, state: detail ?? "" };
    case "PAYOUT_FENCE_MISMATCH":
      return { kind: outcome, holder: detail === "NEWER" ? "NEWER" : "OLDER" };
    default:
      throw new Error(`the admission statement answered ${outcome}`);
  }
}

/** A clear rail answer for a row this replica forwarded (or the sweeper made stale-ambiguous meanwhile). */
// [rule:record-outcome-sql]
const RECORD_OUTCOME = `
  UPDATE rail_submissions
     SET state = $2, rail_reference = $3, rail_reason = $4, forward_delay_ms = $6, updated_at = now(),
         -- A row the sweeper declared stale keeps saying so: the answer came late.
         ambiguity_cause = CASE WHEN state = 'TIMEOUT' THEN ambiguity_cause ELSE $5 END,
         answered_at = CASE WHEN $2 IN ('ACCEPTED', 'REJECTED') THEN now() END
   WHERE payout_id = $1
     AND (state = 'FORWARDING' OR (state = 'TIMEOUT' AND ambiguity_cause = 'STALE_FORWARDING'))`;
// [/rule:record-outcome-sql]

// [rule:paid-but-failed-sql]
/**
 * A payout the rail paid while it was FAILED goes to a human (its client may have paid it again):
 * it keeps its claim and gets PAID_BUT_FAILED with `detail`; any other payout it closes loses its
 * claim. The part both closing statements share (the rail's ACCEPTED, a PAID resolution).
 */
const flaggedIfFailed = (detail: string) => `
           claimed_by = CASE WHEN p.state = 'FAILED' THEN p.claimed_by END,
           claimed_until = CASE WHEN p.state = 'FAILED' THEN p.claimed_until END,
           attention_reason = CASE WHEN p.state = 'FAILED' THEN 'PAID_BUT_FAILED' ELSE p.attention_reason END,
           attention_detail = CASE WHEN p.state = 'FAILED' THEN ${detail} ELSE p.attention_detail END,
           attention_at = CASE WHEN p.state = 'FAILED' THEN now() ELSE p.attention_at END`;
// [/rule:paid-but-failed-sql]

// [rule:payout-after-accepted]
/**
 * The payout of a submission the rail ACCEPTED, closed in the statement that records the answer
 * (decision 072), by the rule of a PAID resolution (payout-after-resolve): the rail paid this
 * payout through this submission, a fact and not a holder's claim, so the fence does not enter
 * into it. An open payout (PENDING, PROCESSING, UNKNOWN) becomes PAID and names the submission;
 * a FAILED one goes to a human (its client may have paid it again); a closed one is left alone.
 * Every row it can touch is one the payout guards (migrations 009, 012) let through, so it never
 * refuses, and so never rolls back the rail's answer with it. `recorded` is the outcome
 * UPDATE's RETURNING *; the closed payouts come back as (payout_id, state).
 */
const closeAccepted = (recorded: string) => `
  closed AS (
    UPDATE payouts p
       SET state = CASE WHEN p.state = 'FAILED' THEN 'NEEDS_ATTENTION' ELSE 'PAID' END,
           rail_reference = CASE WHEN p.state = 'FAILED' THEN p.rail_reference ELSE r.rail_reference END,
           submission_ref = CASE WHEN p.state = 'FAILED' THEN p.submission_ref ELSE r.payout_id END,
           failure_reason = CASE WHEN p.state = 'FAILED' THEN p.failure_reason END,
           ${flaggedIfFailed("format('the rail accepted submission %s (%s) but the payout was FAILED', r.payout_id, r.rail_reference)")},
           updated_at = now()
      FROM ${recorded} r
     WHERE r.state = 'ACCEPTED' AND p.payout_id = r.bound_payout_id
       AND p.state IN ('PENDING', 'PROCESSING', 'UNKNOWN', 'FAILED')
    RETURNING p.payout_id, p.state)`;
// [/rule:payout-after-accepted]

/** In place of closeAccepted for a harness control (a proxy from before decision 072): nothing closed. */
const LEAVE_PAYOUTS = "closed AS (SELECT NULL::text AS payout_id, NULL::text AS state WHERE false)";

/** The recorded rows as `columns` reads them, each with whether its payout is now PAID by this statement. */
const withClosure = (columns: string) => `
  SELECT ${columns}, EXISTS (SELECT 1 FROM closed c WHERE c.payout_id = recorded.bound_payout_id AND c.state = 'PAID') AS payout_closed
    FROM recorded`;

/** One outcome write of a group (recordOutcomes). */
interface OutcomeWrite {
  reference: string;
  state: "ACCEPTED" | "REJECTED" | "TIMEOUT";
  railReference: string | null;
  railReason: string | null;
  ambiguityCause: string | null;
  forwardDelayMs: number;
}

/** RECORD_OUTCOME for a group: the same rule per row, one UPDATE; the rows it changed, as `columns` reads them. */
// [rule:record-outcomes-sql]
const recordOutcomesSql = (columns: string, closing: string) => `
  WITH answers AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[])
      AS a(reference, state, rail_reference, rail_reason, ambiguity_cause, forward_delay_ms)),
  recorded AS (
    UPDATE rail_submissions s
       SET state = a.state, rail_reference = a.rail_reference, rail_reason = a.rail_reason, forward_delay_ms = a.forward_delay_ms,
           updated_at = now(),
           ambiguity_cause = CASE WHEN s.state = 'TIMEOUT' THEN s.ambiguity_cause ELSE a.ambiguity_cause END,
           answered_at = CASE WHEN a.state IN ('ACCEPTED', 'REJECTED') THEN now() END
      FROM answers a
     WHERE s.payout_id = a.reference
       AND (s.state = 'FORWARDING' OR (s.state = 'TIMEOUT' AND s.ambiguity_cause = 'STALE_FORWARDING'))
     RETURNING s.*),
  ${closing}
  ${withClosure(columns)}`;
// [/rule:record-outcomes-sql]

/** The exact statements of the admission path, for the benchmark's raw floor (B0). */
export const ADMISSION_SQL = { admit: ADMIT, recordOutcome: RECORD_OUTCOME } as const;

/** Seconds (3 decimals) as SQL text: ambiguity thresholds are configuration, not input. */
const secs = (ms: number) => (ms / 1000).toFixed(3);

export function createSubmissionStore(
  pool: Pool,
  ambiguousAfterMs: number,
  admission: AdmissionStatement = RAIL_ADMIT,
  batching?: Batching,
  // Production closes; only a harness control passes false (RailProxyControls).
  closesAcceptedPayouts = true,
) {
  // [rule:ambiguous]
  // The one definition of "ambiguous" (SPEC C3 §3.7): TIMEOUT, or FORWARDING past deadline + margin.
  // [rule:d4-ambiguous]
  const isAmbiguous = `(state = 'TIMEOUT' OR (state = 'FORWARDING' AND created_at < now() - make_interval(secs => ${secs(ambiguousAfterMs)})))`;
  // [/rule:ambiguous]
  const columns = `*, ${isAmbiguous} AS ambiguous, created_at::text AS cursor`;
  const closing = closesAcceptedPayouts ? closeAccepted("recorded") : LEAVE_PAYOUTS;
  const recordOutcomesText = recordOutcomesSql(columns, closing);
  const recordOutcomeText = `WITH recorded AS (${RECORD_OUTCOME} RETURNING *), ${closing} ${withClosure(columns)}`;
  const one = async (sql: string, values: unknown[], name?: string): Promise<SubmissionRow | undefined> =>
    (await pool.query<SubmissionRow>(name ? { name, text: sql, values } : { text: sql, values })).rows[0];

  /** The reference of the payout's live submission, if any (for an honest executor to settle). */
  async function liveReference(payoutId: string): Promise<string | undefined> {
    const { rows } = await pool.query<{ payout_id: string }>(
      "SELECT payout_id FROM rail_submissions WHERE bound_payout_id = $1 AND state NOT IN ('REJECTED', 'NOT_FORWARDED') AND reopened_at IS NULL ORDER BY created_at LIMIT 1",
      [payoutId],
    );
    return rows[0]?.payout_id;
  }

  /** One admission, its own statement. */
  async function admitAlone(i: Intent): Promise<AdmitResult> {
    try {
      const { rows } = await pool.query<{ outcome: string; detail: string | null; admitted_at_ms: number }>(admission.query(i));
      // [rule:admit-result]
      const { outcome, detail, admitted_at_ms } = rows[0]!;
      return admitResult(outcome, detail, admitted_at_ms);
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      // [rule:d3-duplicate]
      if (e.code === "23505" && e.constraint === "rail_submissions_pkey") return { kind: "DUPLICATE" };
      if (e.code === "23505" && e.constraint === "rail_submissions_one_live_per_payout") {
        return { kind: "PAYOUT_ALREADY_SUBMITTED", live: await liveReference(i.payoutId).catch(() => undefined) };
      }
      throw err;
    }
    // [/rule:admit-result]
  }

  /** One group of admissions, one statement: ordered by account so that two groups in paydb at
   * once take the accounts' mark rows in the same order (no deadlock between them). */
  async function admitGroup(items: Intent[]): Promise<AdmitResult[]> {
    // A group of one is the one-item statement itself: at low load nothing changes, not even the SQL.
    if (items.length === 1) return [await admitAlone(items[0]!)];
    const order = orderBy(items, (i) => i.accountId);
    const ordered = order.map((k) => items[k]!);
    const { rows } = await againAfterDeadlock(() =>
      pool.query<{ ord: number; outcome: string; detail: string | null; admitted_at_ms: number }>(admission.batchQuery!(ordered)),
    );
    const results = new Array<AdmitResult>(items.length);
    for (const r of rows) results[order[Number(r.ord) - 1]!] = admitResult(r.outcome, r.detail, r.admitted_at_ms);
    if (results.some((r) => r === undefined) || rows.length !== items.length) throw new Error("the group admission statement left an item unanswered");
    return results;
  }

  /** One rail answer, its own statement (its payout closed with it when ACCEPTED). */
  function recordOutcomeAlone(o: OutcomeWrite): Promise<SubmissionRow | undefined> {
    return one(recordOutcomeText, [o.reference, o.state, o.railReference, o.railReason, o.ambiguityCause, Math.round(o.forwardDelayMs)], "rf_record_outcome");
  }

  /** One group of outcome writes, one UPDATE; undefined for a row no longer waiting for an answer. */
  async function recordOutcomes(items: OutcomeWrite[]): Promise<Array<SubmissionRow | undefined>> {
    if (items.length === 1) return [await recordOutcomeAlone(items[0]!)];
    const order = orderBy(items, (o) => o.reference);
    const ordered = order.map((k) => items[k]!);
    const { rows } = await againAfterDeadlock(() =>
      pool.query<SubmissionRow>({
        name: "rf_record_outcomes",
        text: recordOutcomesText,
        values: [
          ordered.map((o) => o.reference),
          ordered.map((o) => o.state),
          ordered.map((o) => o.railReference),
          ordered.map((o) => o.railReason),
          ordered.map((o) => o.ambiguityCause),
          ordered.map((o) => Math.round(o.forwardDelayMs)),
        ],
      }),
    );
    const byReference = new Map(rows.map((r) => [r.payout_id, r]));
    return items.map((o) => byReference.get(o.reference));
  }

  // A group refused for one row's sake (a trigger, a constraint) is run again item by item, so
  // that refusal is that item's alone; a group that failed because paydb was away is not.
  const canGroup = batching !== undefined && batching.maxBatch > 1 && admission.batchQuery !== undefined;
  const groupedAdmit: Grouped<Intent, AdmitResult> | undefined = canGroup
    ? groupCommit(admitGroup, {
        maxBatch: batching.maxBatch,
        maxInFlight: batching.maxInFlight,
        onBatch: batching.onAdmissionBatch,
        alone: { run: (i) => admitAlone(i), when: isRowRefusal },
      })
    : undefined;
  const groupedOutcome: Grouped<OutcomeWrite, SubmissionRow | undefined> | undefined =
    batching !== undefined && batching.maxBatch > 1
      ? groupCommit(recordOutcomes, {
          maxBatch: batching.maxBatch,
          maxInFlight: batching.maxInFlight,
          onBatch: batching.onOutcomeBatch,
          alone: { run: (o) => recordOutcomeAlone(o), when: isRowRefusal },
        })
      : undefined;

  return {
    /** What the admission statement enforces (production: everything). */
    statementGuards: admission.applies,

    /**
     * Binding + steps 1-3 of C3 §3.5 in one statement (alone, or with the admissions that arrived
     * meanwhile). `sent` is called when the statement carrying this intent leaves for paydb: the
     * pre-forward budget counts from there.
     */
    async admit(i: Intent, sent?: () => void): Promise<AdmitResult> {
      if (groupedAdmit) return groupedAdmit(i, sent);
      sent?.();
      return admitAlone(i);
    },

    /** Records the rail's answer (or its absence). undefined: the row is no longer waiting for one. */
    recordOutcome(
      reference: string,
      state: "ACCEPTED" | "REJECTED" | "TIMEOUT",
      railReference: string | null,
      railReason: string | null,
      ambiguityCause: string | null,
      forwardDelayMs: number,
    ): Promise<SubmissionRow | undefined> {
      const write = { reference, state, railReference, railReason, ambiguityCause, forwardDelayMs };
      return groupedOutcome ? groupedOutcome(write) : recordOutcomeAlone(write);
    },

    /**
     * A rail answer for a row that was resolved before it arrived: recorded on the row (once) and
     * the payout flagged. When the answer contradicts the resolution (money moved on a NOT_PAID
     * verdict, or a PAID verdict's payment was refused), the payout becomes NEEDS_ATTENTION.
     */
    // [rule:late-answer-sql]
    recordLateAnswer(reference: string, state: "ACCEPTED" | "REJECTED", railReference: string, railReason: string | null) {
      return one(
        `WITH late AS (
           UPDATE rail_submissions
              SET late_answer_state = $2, late_rail_reference = $3, late_rail_reason = $4, late_answered_at = now(), updated_at = now()
            WHERE payout_id = $1 AND state IN ('RESOLVED_PAID', 'RESOLVED_NOT_PAID') AND late_answered_at IS NULL
            RETURNING *),
         flagged AS (
           UPDATE payouts p
              SET attention_reason = 'LATE_RAIL_ANSWER', attention_at = now(), updated_at = now(),
                  attention_detail = format('the rail answered %s (%s) for submission %s after it was resolved %s', late.late_answer_state, late.late_rail_reference, late.payout_id, late.state),
                  state = CASE WHEN (late.state = 'RESOLVED_NOT_PAID') = (late.late_answer_state = 'ACCEPTED') THEN 'NEEDS_ATTENTION' ELSE p.state END
             FROM late WHERE p.payout_id = late.bound_payout_id
            RETURNING p.payout_id)
         SELECT late.*, false AS ambiguous, late.created_at::text AS cursor FROM late`,
        [reference, state, railReference, railReason],
      );
    },
    // [/rule:late-answer-sql]

    /** The pre-forward budget passed: the rail was not called. Only a row still FORWARDING. */
    // [rule:not-forwarded-sql]
    markNotForwarded(reference: string, forwardDelayMs: number) {
      return one(
        `UPDATE rail_submissions SET state = 'NOT_FORWARDED', forward_delay_ms = $2, updated_at = now()
          WHERE payout_id = $1 AND state = 'FORWARDING' RETURNING ${columns}`,
        [reference, Math.round(forwardDelayMs)],
      );
    },
    // [/rule:not-forwarded-sql]

    get(reference: string) {
      return one(`SELECT ${columns} FROM rail_submissions WHERE payout_id = $1`, [reference]);
    },

    /** Every submission bound to a payout, oldest first. */
    async listForPayout(payoutId: string, limit: number): Promise<SubmissionRow[]> {
      const { rows } = await pool.query<SubmissionRow>(
        `SELECT ${columns} FROM rail_submissions WHERE bound_payout_id = $1 ORDER BY created_at, payout_id LIMIT $2`,
        [payoutId, limit],
      );
      return rows;
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

    /** NOT_PAID resolutions since an instant, oldest resolution first, keyset-paged on (resolved_at, payout_id). */
    async listNotPaidResolutions(since: Date, limit: number, after?: { cursor: string; payoutId: string }): Promise<SubmissionRow[]> {
      const { rows } = await pool.query<SubmissionRow>(
        `SELECT *, false AS ambiguous, resolved_at::text AS cursor FROM rail_submissions
          WHERE state = 'RESOLVED_NOT_PAID' AND resolved_at >= $2
            AND ($3::timestamptz IS NULL OR (resolved_at, payout_id) > ($3::timestamptz, $4::text))
          ORDER BY resolved_at, payout_id LIMIT $1`,
        [limit, since, after?.cursor ?? null, after?.payoutId ?? ""],
      );
      return rows;
    },

    /**
     * Closes an ambiguous row, and its payout in the same statement (decision 066): PAID with the
     * rail's reference of the payment, NOT_PAID only once the row is older than `notPaidMinAgeMs`
     * (paydb's clock; 0 when an operator forces it). Returns undefined when the row is not
     * ambiguous, absent, or too young for NOT_PAID.
     *
     * The payout, by the fence rule: PAID closes an open payout (UNKNOWN, PROCESSING, PENDING) and
     * flags a FAILED one PAID_BUT_FAILED (its client may have paid it again); NOT_PAID fails an
     * UNKNOWN payout (nothing else can pay it: it cannot be fenced, and this was its one live
     * submission) and a PROCESSING or PENDING one only when nobody fenced it with a newer token
     * since (fence <= the submission's token): a newer holder's attempt is its own business.
     */
    // [rule:resolve-sql]
    resolve(
      reference: string,
      outcome: "PAID" | "NOT_PAID",
      actor: string,
      note: string,
      railReference: string | null,
      notPaidMinAgeMs: number,
      failureReason: string,
    ): Promise<ResolvedRow | undefined> {
      return pool
        .query<ResolvedRow>(
          `WITH r AS (
             UPDATE rail_submissions
                SET previous_state = state,
                    state = CASE WHEN $2 = 'PAID' THEN 'RESOLVED_PAID' ELSE 'RESOLVED_NOT_PAID' END,
                    resolution_outcome = $2, resolution_actor = $3, resolution_note = $4,
                    rail_reference = CASE WHEN $2 = 'PAID' THEN $5 ELSE rail_reference END,
                    resolved_at = now(), updated_at = now()
              WHERE payout_id = $1 AND ${isAmbiguous}
                AND ($2 = 'PAID' OR created_at <= now() - make_interval(secs => $6::float8))
              RETURNING *),
           -- [rule:payout-after-resolve]
           closed AS (
             UPDATE payouts p
                SET state = CASE WHEN r.state = 'RESOLVED_NOT_PAID' THEN 'FAILED' WHEN p.state = 'FAILED' THEN 'NEEDS_ATTENTION' ELSE 'PAID' END,
                    rail_reference = CASE WHEN r.state = 'RESOLVED_PAID' AND p.state <> 'FAILED' THEN r.rail_reference ELSE p.rail_reference END,
                    failure_reason = CASE WHEN r.state = 'RESOLVED_NOT_PAID' THEN $7 WHEN p.state = 'FAILED' THEN p.failure_reason END,
                    ${flaggedIfFailed("format('the rail paid it (%s, resolved by %s) but the payout was FAILED', r.rail_reference, r.resolution_actor)")},
                    updated_at = now()
               FROM r
              WHERE p.payout_id = r.bound_payout_id
                AND CASE WHEN r.state = 'RESOLVED_PAID' THEN p.state IN ('UNKNOWN', 'PROCESSING', 'PENDING', 'FAILED')
                         ELSE p.state = 'UNKNOWN' OR (p.state IN ('PROCESSING', 'PENDING') AND p.fence <= r.fencing_token) END
              RETURNING p.state)
           -- [/rule:payout-after-resolve]
           SELECT r.*, false AS ambiguous, r.created_at::text AS cursor,
                  (SELECT state FROM closed) AS payout_state
             FROM r`,
          [reference, outcome, actor, note, railReference, notPaidMinAgeMs / 1000, failureReason],
        )
        .then((res) => res.rows[0]);
    },
    // [/rule:resolve-sql]

    /**
     * UNKNOWN payouts whose submissions are all closed, closed from the one that decides them (the
     * rule of shared/domain/submission-liveness.ts: the oldest that may have paid since the payout was last
     * re-opened, else the newest rail refusal). The statements that close a submission close its
     * payout too; this catches what they could not see: an executor writing UNKNOWN while the
     * resolution was committing, or a late rail answer closing a stale submission. Returns the
     * payouts closed, with the state each was closed in.
     */
    // [rule:payout-unknown-failed]
    async closeSettledUnknown(limit: number): Promise<Array<{ payout_id: string; state: string; submission: string }>> {
      const { rows } = await pool.query<{ payout_id: string; state: string; submission: string }>(
        `WITH stuck AS (
           SELECT p.payout_id FROM payouts p
            WHERE p.state = 'UNKNOWN'
              AND NOT EXISTS (SELECT 1 FROM rail_submissions s WHERE s.bound_payout_id = p.payout_id AND s.state IN ('FORWARDING', 'TIMEOUT'))
            ORDER BY p.state, p.created_at LIMIT $1),
         deciding AS (
           SELECT DISTINCT ON (s.bound_payout_id) s.*
             FROM stuck
             JOIN rail_submissions s ON s.bound_payout_id = stuck.payout_id
             LEFT JOIN LATERAL (
               SELECT r.created_at, r.payout_id FROM rail_submissions r
                WHERE r.bound_payout_id = stuck.payout_id AND r.reopened_at IS NOT NULL
                ORDER BY r.created_at DESC, r.payout_id DESC LIMIT 1) last_reopening ON true
            WHERE s.state <> 'NOT_FORWARDED'
              AND (last_reopening.created_at IS NULL OR (s.created_at, s.payout_id) > (last_reopening.created_at, last_reopening.payout_id))
            ORDER BY s.bound_payout_id, s.state = 'REJECTED',
                     CASE WHEN s.state <> 'REJECTED' THEN s.created_at END ASC,
                     s.created_at DESC, s.payout_id DESC)
         UPDATE payouts p
            SET state = CASE WHEN d.state IN ('ACCEPTED', 'RESOLVED_PAID') THEN 'PAID' ELSE 'FAILED' END,
                rail_reference = CASE WHEN d.state IN ('ACCEPTED', 'RESOLVED_PAID') THEN d.rail_reference ELSE p.rail_reference END,
                failure_reason = CASE WHEN d.state = 'REJECTED' THEN COALESCE(NULLIF(d.rail_reason, ''), 'RAIL_REJECTED')
                                      WHEN d.state = 'RESOLVED_NOT_PAID' THEN 'RESOLVED_NOT_PAID' END,
                claimed_by = NULL, claimed_until = NULL, updated_at = now()
           FROM deciding d
          WHERE p.payout_id = d.bound_payout_id AND p.state = 'UNKNOWN'
            AND d.state IN ('ACCEPTED', 'RESOLVED_PAID', 'REJECTED', 'RESOLVED_NOT_PAID')
          RETURNING p.payout_id, p.state, d.payout_id AS submission`,
        [limit],
      );
      return rows;
    },
    // [/rule:payout-unknown-failed]

    /**
     * The rail's statement shows a payment for a NOT_PAID resolution: recorded once on the row,
     * and the payout becomes NEEDS_ATTENTION. undefined: not a NOT_PAID row, or already recorded.
     */
    // [rule:not-paid-watch-sql]
    recordContradiction(reference: string, railReference: string, actor: string) {
      return one(
        `WITH c AS (
           UPDATE rail_submissions SET contradicted_at = now(), contradicting_rail_reference = $2, contradiction_actor = $3, updated_at = now()
            WHERE payout_id = $1 AND state = 'RESOLVED_NOT_PAID' AND contradicted_at IS NULL
            RETURNING *),
         flagged AS (
           UPDATE payouts p
              SET state = 'NEEDS_ATTENTION', attention_reason = 'RESOLUTION_CONTRADICTED', attention_at = now(), updated_at = now(),
                  attention_detail = format('submission %s was resolved NOT_PAID, but the rail''s statement shows payment %s', c.payout_id, c.contradicting_rail_reference)
             FROM c WHERE p.payout_id = c.bound_payout_id
            RETURNING p.payout_id)
         SELECT c.*, false AS ambiguous, c.created_at::text AS cursor FROM c`,
        [reference, railReference, actor],
      );
    },
    // [/rule:not-paid-watch-sql]

    /** Turns FORWARDING rows whose replica must have died into TIMEOUT. Never forwards. */
    // [rule:sweeper-sql]
    async sweepStaleForwarding(): Promise<number> {
      const res = await pool.query(
        // [rule:d4-stale-forwarding]
        `UPDATE rail_submissions SET state = 'TIMEOUT', ambiguity_cause = 'STALE_FORWARDING', updated_at = now()
          WHERE state = 'FORWARDING' AND ${isAmbiguous}`,
      );
      return res.rowCount ?? 0;
    },
    // [/rule:sweeper-sql]

    async countUnresolved(): Promise<{ count: number; oldestAgeSeconds: number }> {
      const { rows } = await pool.query<{ count: string; oldest: number | null }>(
        `SELECT count(*) AS count, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest
           FROM rail_submissions WHERE state IN ('FORWARDING', 'TIMEOUT') AND ${isAmbiguous}`,
      );
      return { count: Number(rows[0]?.count ?? 0), oldestAgeSeconds: rows[0]?.oldest ?? 0 };
    },
  };
}

export type SubmissionStore = ReturnType<typeof createSubmissionStore>;
