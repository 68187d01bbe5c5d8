/**
 * The invariant checker (SPEC C5; `railfence check`, the drills, and a daily audit in
 * production). It trusts nothing the proxy or the executors say about themselves: the rail's
 * statement and the database-written mark history are the evidence.
 *
 * Read-only and bounded in memory: the statement is streamed page by page into a temporary table
 * of the audit's own session (each payment's payout named by the one reference mapping,
 * shared/domain/submission-ref.ts), every accepted payment is tied to a payout by reference or by
 * content (shared/domain/payment-match.ts, in SQL), and each invariant is one query that returns only
 * its violations (at most `maxRows` of each, with the total count). PostgreSQL does the joins;
 * the process holds one page and the violations.
 */
import type pg from "pg";
import { payoutIdOf } from "../../shared/domain/submission-ref.js";
import { INVARIANT_QUERIES, INVARIANTS } from "./invariants.js";
import type { StatementSource } from "./statement.js";

export interface Violation {
  invariant: string;
  /** One line a human can act on. */
  detail: string;
  /** The rows involved, as the query returned them. */
  row: Record<string, unknown>;
}

export interface AuditCounts {
  railPayments: number;
  railAccepted: number;
  intents: number;
  accepted: number;
  rejected: number;
  notForwarded: number;
  ambiguousUnresolved: number;
  resolvedPaid: number;
  resolvedNotPaid: number;
  inFlight: number;
  payouts: number;
  payoutsPaid: number;
  payoutsFailed: number;
  payoutsUnknown: number;
  payoutsOpen: number;
  payoutsNeedsAttention: number;
  markAdvances: number;
}

export interface AuditResult {
  violations: Violation[];
  /** Violations per invariant (all of them, even past maxRows). */
  table: Array<{ invariant: string; violations: number }>;
  counts: AuditCounts;
  window: { since: string | null; until: string | null };
}

export interface AuditOptions {
  since?: Date;
  until?: Date;
  /** The system was drained: work still in flight is a violation. */
  quiescent?: boolean;
  /** FORWARDING rows younger than this are "in flight" in a quiescent check. */
  inFlightMs?: number;
  /** The statement is read from `since - slack` (the two clocks differ; payments follow intents). */
  slackMs?: number;
  /** Rows reported per invariant (the count is always complete). */
  maxRows?: number;
  /** The longest a payout may stay open (PENDING, PROCESSING, UNKNOWN) before PAYOUT_AGE flags it. Default 24 h. */
  maxOpenAgeMs?: number;
}

const DEFAULT_MAX_OPEN_AGE_MS = 24 * 3_600_000;

const DEFAULT_SLACK_MS = 10 * 60_000;

/** A human line for a violation row. */
function describe(invariant: string, row: Record<string, unknown>): string {
  const parts = Object.entries(row)
    .filter(([k]) => k !== "total")
    .map(([k, v]) => `${k}=${Array.isArray(v) ? `[${v.join(",")}]` : v instanceof Date ? v.toISOString() : String(v)}`);
  return `${invariant}: ${parts.join(" ")}`;
}

async function loadStatement(c: pg.PoolClient, statement: StatementSource, since: Date | undefined, until: Date | undefined): Promise<void> {
  await c.query(`CREATE TEMP TABLE audit_statement (
    rail_reference text PRIMARY KEY, client_reference text NOT NULL, mapped_payout text NOT NULL,
    account_id text NOT NULL, beneficiary text NOT NULL, amount_minor bigint NOT NULL, currency text NOT NULL,
    status text NOT NULL, booked_at timestamptz NOT NULL, sequence bigint NOT NULL)`);
  for await (const page of statement(since, until)) {
    await c.query(
      `INSERT INTO audit_statement
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::timestamptz[], $10::bigint[])
       ON CONFLICT (rail_reference) DO NOTHING`,
      [
        page.map((p) => p.railReference),
        page.map((p) => p.clientReference),
        page.map((p) => payoutIdOf(p.clientReference)),
        page.map((p) => p.accountId),
        page.map((p) => p.beneficiary),
        page.map((p) => p.amountMinor.toString()),
        page.map((p) => p.currency),
        page.map((p) => p.status),
        page.map((p) => p.bookedAt),
        page.map((p) => p.sequence.toString()),
      ],
    );
  }
  await c.query("CREATE INDEX ON audit_statement (client_reference)");
  await c.query("ANALYZE audit_statement");
}

/** Ties every accepted payment of the loaded statement to a payout (in the audit's snapshot). */
async function assignPayments(c: pg.PoolClient): Promise<void> {
  // Every accepted payment, tied to a payout: by the payout its reference names when that payout
  // exists; otherwise by content, when exactly one payout pays the same thing.
  await c.query(`CREATE TEMP TABLE audit_assigned AS
    SELECT s.rail_reference, s.client_reference, s.account_id, s.amount_minor, s.currency, s.beneficiary, s.booked_at,
           CASE WHEN p.payout_id IS NOT NULL THEN 'REFERENCE' WHEN cand.n = 1 THEN 'CONTENT' END AS mapped_by,
           COALESCE(p.payout_id, CASE WHEN cand.n = 1 THEN cand.ids[1] END) AS payout_id,
           COALESCE(cand.n, 0) AS candidates, cand.ids AS candidate_ids
      FROM audit_statement s
      LEFT JOIN payouts p ON p.payout_id = s.mapped_payout
      LEFT JOIN LATERAL (
        SELECT count(*)::int AS n, (array_agg(q.payout_id ORDER BY q.payout_id))[1:10] AS ids
          FROM payouts q
         WHERE p.payout_id IS NULL AND q.account_id = s.account_id AND q.amount_minor = s.amount_minor
           AND q.currency = s.currency AND q.beneficiary = s.beneficiary) cand ON true
     WHERE s.status = 'ACCEPTED'`);
  await c.query("CREATE INDEX ON audit_assigned (payout_id)");
  await c.query("ANALYZE audit_assigned");
}

async function countAll(c: pg.PoolClient, window: [Date | null, Date | null], inFlightSeconds: number): Promise<AuditCounts> {
  const w = (col: string) => `($1::timestamptz IS NULL OR ${col} >= $1) AND ($2::timestamptz IS NULL OR ${col} < $2)`;
  const { rows } = await c.query<Record<string, string>>(
    `SELECT
       (SELECT count(*) FROM audit_statement) AS rail_payments,
       (SELECT count(*) FROM audit_statement WHERE status = 'ACCEPTED') AS rail_accepted,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")}) AS intents,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND state = 'ACCEPTED') AS accepted,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND state = 'REJECTED') AS rejected,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND state = 'NOT_FORWARDED') AS not_forwarded,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND (state = 'TIMEOUT' OR (state = 'FORWARDING' AND created_at < now() - make_interval(secs => $3::float8)))) AS ambiguous_unresolved,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND state = 'RESOLVED_PAID') AS resolved_paid,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND state = 'RESOLVED_NOT_PAID') AS resolved_not_paid,
       (SELECT count(*) FROM rail_submissions WHERE ${w("created_at")} AND state = 'FORWARDING' AND created_at >= now() - make_interval(secs => $3::float8)) AS in_flight,
       (SELECT count(*) FROM payouts WHERE ${w("created_at")}) AS payouts,
       (SELECT count(*) FROM payouts WHERE ${w("created_at")} AND state = 'PAID') AS payouts_paid,
       (SELECT count(*) FROM payouts WHERE ${w("created_at")} AND state = 'FAILED') AS payouts_failed,
       (SELECT count(*) FROM payouts WHERE ${w("created_at")} AND state = 'UNKNOWN') AS payouts_unknown,
       (SELECT count(*) FROM payouts WHERE ${w("created_at")} AND state IN ('PENDING', 'PROCESSING')) AS payouts_open,
       (SELECT count(*) FROM payouts WHERE ${w("created_at")} AND state = 'NEEDS_ATTENTION') AS payouts_needs_attention,
       (SELECT count(*) FROM rail_high_water_log WHERE ${w("logged_at")}) AS mark_advances`,
    [...window, inFlightSeconds],
  );
  const r = rows[0]!;
  const n = (k: string) => Number(r[k] ?? 0);
  return {
    railPayments: n("rail_payments"),
    railAccepted: n("rail_accepted"),
    intents: n("intents"),
    accepted: n("accepted"),
    rejected: n("rejected"),
    notForwarded: n("not_forwarded"),
    ambiguousUnresolved: n("ambiguous_unresolved"),
    resolvedPaid: n("resolved_paid"),
    resolvedNotPaid: n("resolved_not_paid"),
    inFlight: n("in_flight"),
    payouts: n("payouts"),
    payoutsPaid: n("payouts_paid"),
    payoutsFailed: n("payouts_failed"),
    payoutsUnknown: n("payouts_unknown"),
    payoutsOpen: n("payouts_open"),
    payoutsNeedsAttention: n("payouts_needs_attention"),
    markAdvances: n("mark_advances"),
  };
}

/** The creation time of the oldest payout changed in [since, until) (paydb's payout_history), if older than since. */
async function oldestChangedPayout(paydb: pg.Pool, since: Date, until: Date | undefined): Promise<Date | undefined> {
  const { rows } = await paydb.query<{ oldest: Date | null }>(
    `SELECT min(p.created_at) AS oldest FROM payouts p
      WHERE p.created_at < $1 AND EXISTS (SELECT 1 FROM payout_history h WHERE h.payout_id = p.payout_id
                                            AND h.changed_at >= $1 AND ($2::timestamptz IS NULL OR h.changed_at < $2))`,
    [since, until ?? null],
  );
  return rows[0]?.oldest ?? undefined;
}

/** Runs every invariant over paydb (read-only) and the statement. */
export async function runAudit(paydb: pg.Pool, statement: StatementSource, opts: AuditOptions = {}): Promise<AuditResult> {
  const maxRows = opts.maxRows ?? 200;
  const window: [Date | null, Date | null] = [opts.since ?? null, opts.until ?? null];
  const inFlightSeconds = (opts.inFlightMs ?? 60_000) / 1000;
  const maxOpenAgeSeconds = (opts.maxOpenAgeMs ?? DEFAULT_MAX_OPEN_AGE_MS) / 1000;
  // The statement must cover the payments of every payout judged: those created in the window,
  // and older ones changed in it (their payments may be as old as they are).
  const oldestJudged = opts.since ? await oldestChangedPayout(paydb, opts.since, opts.until) : undefined;
  const from = opts.since && oldestJudged && oldestJudged < opts.since ? oldestJudged : opts.since;
  const statementSince = from ? new Date(from.getTime() - (opts.slackMs ?? DEFAULT_SLACK_MS)) : undefined;
  const statementUntil = opts.until ? new Date(opts.until.getTime() + (opts.slackMs ?? DEFAULT_SLACK_MS)) : undefined;
  const c = await paydb.connect();
  try {
    // The statement first, then one snapshot for every query: the invariants see one consistent
    // paydb, taken after the last payment was read. Every payment on the statement was booked
    // before the snapshot, and the proxy commits a payment's intent (and the payout existed)
    // before it calls the rail, so the snapshot holds every intent the statement can show. A
    // snapshot taken first would miss intents committed while a long statement streams in on a
    // live system, and name their payments as paid without an intent (the daily audit runs live).
    // audit_statement is a temporary table of this session, so it outlives the load's autocommits.
    // (Not READ ONLY: PostgreSQL refuses even temporary tables there; the auditor's role can write
    // nothing else.)
    await loadStatement(c, statement, statementSince, statementUntil);
    await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await assignPayments(c);
    const violations: Violation[] = [];
    const totals = new Map<string, number>();
    for (const q of INVARIANT_QUERIES) {
      if (q.quiescentOnly && !opts.quiescent) continue;
      // Every query gets the same four parameters ($1 since, $2 until, $3 in-flight seconds, $4
      // open age), typed once here so a query may use any of them or none.
      const { rows } = await c.query<Record<string, unknown>>(
        `SELECT v.*, count(*) OVER () AS total FROM (${q.sql}) v
           CROSS JOIN (SELECT $1::timestamptz, $2::timestamptz, $3::float8, $4::float8) typed LIMIT ${maxRows}`,
        [...window, inFlightSeconds, maxOpenAgeSeconds],
      );
      totals.set(q.name, (totals.get(q.name) ?? 0) + Number(rows[0]?.total ?? 0));
      for (const row of rows) {
        const { total: _total, ...rest } = row;
        violations.push({ invariant: q.name, detail: describe(q.name, rest), row: rest });
      }
    }
    const counts = await countAll(c, window, inFlightSeconds);
    await c.query("ROLLBACK");
    return {
      violations,
      table: INVARIANTS.map((invariant) => ({ invariant, violations: totals.get(invariant) ?? 0 })),
      counts,
      window: { since: opts.since?.toISOString() ?? null, until: opts.until?.toISOString() ?? null },
    };
  } finally {
    // Temporary tables go with the session: never hand it back to a pool.
    c.release(true);
  }
}

/** The verdict table as text (markdown-compatible). */
export function formatTable(result: Pick<AuditResult, "table">): string {
  const lines = ["| invariant | verdict | violations |", "|---|---|---|"];
  for (const row of result.table) lines.push(`| ${row.invariant} | ${row.violations === 0 ? "PASS" : "FAIL"} | ${row.violations} |`);
  return lines.join("\n");
}
