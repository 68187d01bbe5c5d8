/**
 * The invariant checker (SPEC C5). It reads the rail's own ledger (raildb `payments`, the third
 * party's books) and paydb, and reports every violation. It trusts nothing the proxy or the
 * executors say about themselves: the rail ledger and the database-written mark history are
 * the evidence.
 *
 * Invariants:
 *   INV-02            no client reference paid more than once on the rail;
 *   INTENT_FIRST      every rail payment has an intent row (nothing reached the rail around the proxy);
 *   FENCE_ADVANCED    every intent advanced its account's mark (no admission at a token <= the mark);
 *   MARK_MONOTONIC    marks never decreased (audit log) and the stored mark is the highest advance;
 *   OUTCOME_KNOWN     every intent has an outcome or is unresolved-and-listed; resolutions agree with the rail;
 *   PAYOUT_CONSISTENT every payout is terminal or accounted for, and agrees with the rail ledger.
 */
import pg from "pg";
import { payoutIdOf } from "../shared/submission-ref.js";

export interface Violation {
  invariant: string;
  detail: string;
}

export interface CheckCounts {
  railPayments: number;
  railAccepted: number;
  intents: number;
  accepted: number;
  rejected: number;
  ambiguousUnresolved: number;
  resolvedPaid: number;
  resolvedNotPaid: number;
  inFlight: number;
  payouts: number;
  payoutsPaid: number;
  payoutsFailed: number;
  payoutsUnknown: number;
  payoutsOpen: number;
  markAdvances: number;
}

export interface CheckResult {
  violations: Violation[];
  counts: CheckCounts;
  /** Per-invariant pass/fail for the verdict table. */
  table: Array<{ invariant: string; violations: number }>;
}

export const INVARIANTS = ["INV-02", "INTENT_FIRST", "FENCE_ADVANCED", "MARK_MONOTONIC", "OUTCOME_KNOWN", "PAYOUT_CONSISTENT"] as const;

async function rows<T extends pg.QueryResultRow>(c: pg.Client, sql: string): Promise<T[]> {
  return (await c.query<T>(sql)).rows;
}

/** Runs every check. `quiescent` = the system was stopped/drained: open work is a violation. */
export async function checkInvariants(paydbUrl: string, raildbUrl: string, opts: { quiescent?: boolean } = {}): Promise<CheckResult> {
  const paydb = new pg.Client({ connectionString: paydbUrl });
  const raildb = new pg.Client({ connectionString: raildbUrl });
  await paydb.connect();
  await raildb.connect();
  const violations: Violation[] = [];
  const add = (invariant: string, detail: string) => violations.push({ invariant, detail });
  try {
    const payments = await rows<{ client_reference: string; account_id: string; amount_minor: string; currency: string; status: string }>(
      raildb,
      "SELECT client_reference, account_id, amount_minor::text, currency, status FROM payments ORDER BY sequence",
    );
    // Accepted payments per submission reference, and per payout (an executor may present a
    // fresh reference per attempt: INV-02 is about the payout, not the reference).
    const accepted = new Map<string, number>();
    const acceptedByPayout = new Map<string, number>();
    for (const p of payments) {
      if (p.status !== "ACCEPTED") continue;
      accepted.set(p.client_reference, (accepted.get(p.client_reference) ?? 0) + 1);
      const payout = payoutIdOf(p.client_reference);
      acceptedByPayout.set(payout, (acceptedByPayout.get(payout) ?? 0) + 1);
    }

    // INV-02 on the rail's own ledger.
    for (const [payout, n] of acceptedByPayout) if (n > 1) add("INV-02", `payout ${payout} paid ${n} times on the rail`);

    const intents = await rows<{ payout_id: string; account_id: string; fencing_token: string; amount_minor: string; currency: string; state: string; mark_advanced: boolean; stale: boolean }>(
      paydb,
      `SELECT payout_id, account_id, fencing_token::text, amount_minor::text, currency, state, mark_advanced,
              (state = 'FORWARDING' AND created_at < now() - interval '60 seconds') AS stale
         FROM rail_submissions`,
    );
    const intentById = new Map(intents.map((i) => [i.payout_id, i]));

    // INTENT_FIRST: every rail payment has an intent, with the same account and amount.
    for (const p of payments) {
      const i = intentById.get(p.client_reference);
      if (!i) add("INTENT_FIRST", `rail payment for ${p.client_reference} has no intent row`);
      else if (i.account_id !== p.account_id || i.amount_minor !== p.amount_minor || i.currency !== p.currency) {
        add("INTENT_FIRST", `rail payment for ${p.client_reference} differs from its intent`);
      }
    }

    // FENCE_ADVANCED + MARK_MONOTONIC from the database-written history.
    const log = await rows<{ account_id: string; old_mark: string | null; new_mark: string }>(
      paydb,
      "SELECT account_id, old_mark::text, new_mark::text FROM rail_high_water_log ORDER BY account_id, id",
    );
    const advanced = new Set<string>();
    const lastByAccount = new Map<string, bigint>();
    for (const l of log) {
      advanced.add(`${l.account_id}/${l.new_mark}`);
      const prev = lastByAccount.get(l.account_id);
      const next = BigInt(l.new_mark);
      if (prev !== undefined && next <= prev) add("MARK_MONOTONIC", `mark of ${l.account_id} went ${prev} -> ${next}`);
      if (l.old_mark !== null && prev !== undefined && BigInt(l.old_mark) !== prev) add("MARK_MONOTONIC", `mark history of ${l.account_id} has a gap (${prev} then ${l.old_mark})`);
      lastByAccount.set(l.account_id, next);
    }
    const marks = await rows<{ account_id: string; mark: string }>(paydb, "SELECT account_id, mark::text FROM rail_high_water");
    for (const m of marks) {
      const last = lastByAccount.get(m.account_id);
      if (last === undefined || BigInt(m.mark) !== last) add("MARK_MONOTONIC", `stored mark of ${m.account_id} (${m.mark}) is not its highest recorded advance (${last ?? "none"})`);
    }
    for (const i of intents) {
      if (!i.mark_advanced || !advanced.has(`${i.account_id}/${i.fencing_token}`)) {
        add("FENCE_ADVANCED", `payout ${i.payout_id} was admitted at token ${i.fencing_token} without advancing the mark of ${i.account_id}`);
      }
    }

    // OUTCOME_KNOWN: outcomes agree with the rail.
    for (const i of intents) {
      const paid = accepted.get(i.payout_id) ?? 0;
      if (i.state === "ACCEPTED" && paid === 0) add("OUTCOME_KNOWN", `payout ${i.payout_id} is ACCEPTED but the rail has no payment`);
      if (i.state === "REJECTED" && paid > 0) add("OUTCOME_KNOWN", `payout ${i.payout_id} is REJECTED but the rail paid it`);
      if (i.state === "RESOLVED_PAID" && paid === 0) add("OUTCOME_KNOWN", `payout ${i.payout_id} was resolved PAID but the rail has no payment`);
      if (i.state === "RESOLVED_NOT_PAID" && paid > 0) add("OUTCOME_KNOWN", `payout ${i.payout_id} was resolved NOT_PAID but the rail paid it`);
      if (opts.quiescent && i.state === "FORWARDING" && !i.stale) add("OUTCOME_KNOWN", `payout ${i.payout_id} is still FORWARDING`);
    }

    // PAYOUT_CONSISTENT.
    const payouts = await rows<{ payout_id: string; state: string }>(paydb, "SELECT payout_id, state FROM payouts");
    for (const p of payouts) {
      const paid = acceptedByPayout.get(p.payout_id) ?? 0;
      if (p.state === "PAID" && paid === 0) add("PAYOUT_CONSISTENT", `payout ${p.payout_id} is PAID but the rail has no payment`);
      if (p.state === "FAILED" && paid > 0) add("PAYOUT_CONSISTENT", `payout ${p.payout_id} is FAILED but the rail paid it`);
      if (opts.quiescent && (p.state === "PENDING" || p.state === "PROCESSING")) add("PAYOUT_CONSISTENT", `payout ${p.payout_id} is still ${p.state}`);
    }

    const count = (pred: (i: (typeof intents)[number]) => boolean) => intents.filter(pred).length;
    const counts: CheckCounts = {
      railPayments: payments.length,
      railAccepted: payments.filter((p) => p.status === "ACCEPTED").length,
      intents: intents.length,
      accepted: count((i) => i.state === "ACCEPTED"),
      rejected: count((i) => i.state === "REJECTED"),
      ambiguousUnresolved: count((i) => i.state === "TIMEOUT" || (i.state === "FORWARDING" && i.stale)),
      resolvedPaid: count((i) => i.state === "RESOLVED_PAID"),
      resolvedNotPaid: count((i) => i.state === "RESOLVED_NOT_PAID"),
      inFlight: count((i) => i.state === "FORWARDING" && !i.stale),
      payouts: payouts.length,
      payoutsPaid: payouts.filter((p) => p.state === "PAID").length,
      payoutsFailed: payouts.filter((p) => p.state === "FAILED").length,
      payoutsUnknown: payouts.filter((p) => p.state === "UNKNOWN").length,
      payoutsOpen: payouts.filter((p) => p.state === "PENDING" || p.state === "PROCESSING").length,
      markAdvances: log.length,
    };
    const table = INVARIANTS.map((invariant) => ({ invariant, violations: violations.filter((v) => v.invariant === invariant).length }));
    return { violations, counts, table };
  } finally {
    await paydb.end();
    await raildb.end();
  }
}

/** The verdict table as text (markdown-compatible). */
export function formatTable(result: CheckResult): string {
  const lines = ["| invariant | verdict | violations |", "|---|---|---|"];
  for (const row of result.table) lines.push(`| ${row.invariant} | ${row.violations === 0 ? "PASS" : "FAIL"} | ${row.violations} |`);
  return lines.join("\n");
}
