/**
 * One reconciler run (UC-07), three named passes. Never resubmits; dry-run decides and logs only.
 * The reconciler writes no payout row (decision 066): rail-proxy closes a payout in the statement
 * that closes its submission, and its sweeper closes what that statement could not see.
 *
 * 1. resolveAmbiguous: every ambiguous submission is decided against the rail's statement
 *    (decide.ts) and the clear ones are closed with ResolveSubmission, payout included.
 * 2. watchNotPaidVerdicts: every submission resolved NOT_PAID within the watch period is checked
 *    against the statement again; a payment that appears later is recorded on the ledger
 *    (RecordContradiction), counted, paged, and its payout becomes NEEDS_ATTENTION.
 * 3. findUnrecordedPayments (unrecorded-payments.ts): rail payments that name one of our payouts
 *    with no intent on the ledger (paydb lost acknowledged commits): the payout is taken as paid
 *    and flagged.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { errorReason, hasReason, REASONS } from "../shared/domain/errors.js";
import type { Logger } from "../shared/process/logger.js";
import { statementPages } from "../shared/domain/rail-statement.js";
import { ResolutionOutcome, SubmissionState, type Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { decide, type AmbiguousSubmission, type Decision, type StatementEntry } from "./decide.js";
import { contentKey } from "../shared/domain/payment-match.js";
import { payoutIdOf } from "../shared/domain/submission-ref.js";
import type { ReconcilerStore } from "./payout-store.js";
import type { RailProxyClient } from "../shared/rpc/proxy-pool.js";
import type { ReconcilerMetrics } from "./reconciler-metrics.js";
import { findUnrecordedPayments } from "./unrecorded-payments.js";

/** Read the statement from a little before the oldest submission: the two clocks differ. */
const STATEMENT_SLACK_MS = 5 * 60_000;

export interface ReconcileDeps {
  proxy: () => RailProxyClient;
  store: ReconcilerStore;
  metrics: ReconcilerMetrics;
  logger: Logger;
  settlementWindowMs: number;
  /** Added to the settlement window: the clocks it compares may disagree by this much. */
  clockSkewAllowanceMs: number;
  /** How long NOT_PAID verdicts keep being checked against the statement (0: not at all). */
  contradictionWatchMs: number;
  /** How far back rail payments are checked for an intent on the ledger (0: not at all). */
  unrecordedWatchMs: number;
  dryRun: boolean;
  actor: string;
  callTimeoutMs: number;
  now?: () => Date;
}

export type DecisionName = Decision["decision"] | "RACED" | "CONTRADICTED" | "UNRECORDED" | "ERROR";

export interface RunSummary {
  event: "reconcile_summary";
  dry_run: boolean;
  unresolved_seen: number;
  decisions: Record<DecisionName, number>;
  left_unresolved: number;
  oldest_unresolved_age_seconds: number;
  not_paid_watched: number;
  statement_payments_read: number;
  covered_until: string | null;
  duration_ms: number;
}

function toAmbiguous(s: Submission): AmbiguousSubmission {
  return {
    payoutId: s.payoutId,
    accountId: s.accountId,
    amountMinor: s.amount?.amountMinor ?? 0n,
    currency: s.amount?.currency ?? "",
    beneficiary: s.beneficiary,
    createdAt: s.createdAt ? timestampDate(s.createdAt) : new Date(0),
  };
}

export function createReconciler(deps: ReconcileDeps) {
  const { store, metrics, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const opts = () => ({ timeoutMs: deps.callTimeoutMs });

  async function listAll(page: (token: string) => Promise<{ submissions: Submission[]; nextPageToken: string }>): Promise<Submission[]> {
    const all: Submission[] = [];
    let pageToken = "";
    do {
      const res = await page(pageToken);
      all.push(...res.submissions);
      pageToken = res.nextPageToken;
    } while (pageToken);
    return all;
  }

  /**
   * The statement entries that concern the given submissions, and the instant the statement
   * covers: by exact reference; by the payout a reference names (shared/domain/submission-ref.ts); and by
   * content (shared/domain/payment-match.ts) for entries whose reference names no payout we know.
   */
  async function readStatement(since: Date, subs: readonly Submission[]) {
    const refs = new Set(subs.map((s) => s.payoutId));
    const payouts = new Set(subs.map((s) => s.boundPayoutId));
    const contents = new Set(subs.map((s) => contentKey(toAmbiguous(s))));
    const byRef = new Map<string, StatementEntry[]>();
    const byPayout = new Map<string, StatementEntry[]>();
    const byContent = new Map<string, StatementEntry[]>();
    const push = (m: Map<string, StatementEntry[]>, k: string, e: StatementEntry) => m.set(k, [...(m.get(k) ?? []), e]);
    let coveredUntil: Date | undefined;
    let read = 0;
    for await (const page of statementPages((req) => deps.proxy().getRailStatement(req, opts()), since)) {
      coveredUntil ??= page.coveredUntil;
      for (const entry of page.entries) {
        read++;
        if (refs.has(entry.clientReference)) push(byRef, entry.clientReference, entry);
        const named = payoutIdOf(entry.clientReference);
        if (payouts.has(named)) push(byPayout, named, entry);
        else if (contents.has(contentKey(entry))) push(byContent, contentKey(entry), entry);
      }
    }
    // Content matches count only when their reference names no payout at all (a payout of its own
    // with the same content is another payout's payment, not this one's).
    const named = [...new Set([...byContent.values()].flat().map((e) => payoutIdOf(e.clientReference)))];
    const existing = named.length ? await store.existingPayouts(named) : new Set<string>();
    for (const [k, list] of byContent)
      byContent.set(
        k,
        list.filter((e) => !existing.has(payoutIdOf(e.clientReference))),
      );
    /** Other payments of a submission's payout: same payout by reference, or same content under an unknown reference. */
    const othersOf = (s: Submission) => [...(byPayout.get(s.boundPayoutId) ?? []), ...(byContent.get(contentKey(toAmbiguous(s))) ?? [])];
    return { byRef, othersOf, coveredUntil: coveredUntil ?? new Date(0), read };
  }

  /** The rail paid a payout with no intent on the ledger (pass 3): paydb's payout_paid_without_intent. */
  async function paidWithoutIntent(payoutId: string, railReference: string): Promise<boolean> {
    const after = await store.paidWithoutIntent(payoutId, railReference);
    if (after === "NEEDS_ATTENTION") paidButFailed(payoutId, railReference);
    return after !== undefined;
  }

  /** Money moved for a payout the books say FAILED: paydb flagged it for a human; page. */
  function paidButFailed(payoutId: string, railReference: string) {
    metrics.paidButFailed.inc();
    logger.error(
      { event: "paid_but_failed", payout_id: payoutId, rail_reference: railReference },
      "the rail paid a payout recorded FAILED; flagged NEEDS_ATTENTION (its client may have paid it again)",
    );
  }

  type Statement = Awaited<ReturnType<typeof readStatement>>;
  type Count = (d: DecisionName) => void;

  /** Pass 1: close what the statement makes clear. Returns the submissions left open. */
  async function resolveAmbiguous(unresolved: readonly Submission[], statement: Statement, count: Count): Promise<AmbiguousSubmission[]> {
    const left: AmbiguousSubmission[] = [];
    const ctx = {
      now: now(),
      coveredUntil: statement.coveredUntil,
      settlementWindowMs: deps.settlementWindowMs,
      clockSkewAllowanceMs: deps.clockSkewAllowanceMs,
    };
    for (const raw of unresolved) {
      const sub = toAmbiguous(raw);
      const d = decide(sub, statement.byRef.get(sub.payoutId) ?? [], ctx, statement.othersOf(raw));
      const line = { event: "decision", payout_id: sub.payoutId, decision: d.decision, note: d.note, dry_run: deps.dryRun };
      if (d.decision === "HUMAN") logger.warn(line, "needs a human");
      else logger.info(line, `decision ${d.decision}`);
      if (d.decision === "WAIT" || d.decision === "HUMAN" || deps.dryRun) {
        count(d.decision);
        left.push(sub);
        continue;
      }
      try {
        // [rule:reconcile-apply]
        // One call, one statement: the submission and its payout close together (decision 066).
        const res = await deps
          .proxy()
          .resolveSubmission(
            d.decision === "PAID"
              ? { payoutId: sub.payoutId, outcome: ResolutionOutcome.PAID, actor: deps.actor, note: d.note, railReference: d.railReference }
              : { payoutId: sub.payoutId, outcome: ResolutionOutcome.NOT_PAID, actor: deps.actor, note: d.note, failureReason: d.failureReason },
            opts(),
          );
        // [/rule:reconcile-apply]
        if (d.decision === "PAID" && res.payoutState === "NEEDS_ATTENTION") paidButFailed(raw.boundPayoutId, d.railReference);
        count(d.decision);
      } catch (err) {
        if (hasReason(err, REASONS.NOT_AMBIGUOUS)) {
          // Closed meanwhile (a late rail answer, or a human), payout included: nothing to do.
          logger.info({ event: "resolve_raced", payout_id: sub.payoutId }, "submission was closed meanwhile");
          count("RACED");
          continue;
        }
        logger.error(
          { event: "resolve_failed", payout_id: sub.payoutId, code: Code[ConnectError.from(err).code], reason: errorReason(err) },
          "could not apply decision",
        );
        count("ERROR");
        left.push(sub);
      }
    }
    return left;
  }

  /** Pass 2: a NOT_PAID verdict the statement now contradicts. */
  // [rule:not-paid-watch]
  async function watchNotPaidVerdicts(watched: readonly Submission[], statement: Statement | undefined, count: Count): Promise<void> {
    for (const s of watched) {
      const paid = (statement?.byRef.get(s.payoutId) ?? []).find((e) => e.status === "ACCEPTED");
      if (!paid) continue;
      try {
        await deps.proxy().recordContradiction({ payoutId: s.payoutId, railReference: paid.railReference, actor: deps.actor }, opts());
        metrics.contradicted.inc();
        logger.error(
          { event: "resolution_contradicted", payout_id: s.payoutId, bound_payout_id: s.boundPayoutId, rail_reference: paid.railReference },
          "a NOT_PAID resolution is contradicted by the rail's statement: the payout was paid; it needs a human",
        );
        count("CONTRADICTED");
      } catch (err) {
        logger.error(
          { event: "contradiction_not_recorded", payout_id: s.payoutId, code: Code[ConnectError.from(err).code], reason: errorReason(err) },
          "could not record a contradicted resolution",
        );
        count("ERROR");
      }
    }
  }
  // [/rule:not-paid-watch]

  /** Pass 3: payments the rail booked with no intent on the ledger. */
  async function unrecordedPayments(counts: Record<DecisionName, number>, count: Count): Promise<number> {
    try {
      const found = await findUnrecordedPayments({
        proxy: deps.proxy,
        store,
        metrics,
        logger,
        watchMs: deps.unrecordedWatchMs,
        callTimeoutMs: deps.callTimeoutMs,
        now,
        markPaid: deps.dryRun ? async () => false : paidWithoutIntent,
      });
      counts.UNRECORDED += found.found;
      metrics.decisions.inc({ decision: "unrecorded" }, found.found);
      return found.read;
    } catch (err) {
      logger.error(
        { event: "unrecorded_pass_failed", code: Code[ConnectError.from(err).code], reason: errorReason(err) },
        "could not check the rail's payments for intents",
      );
      count("ERROR");
      return 0;
    }
  }

  return async function runOnce(): Promise<RunSummary> {
    const started = performance.now();
    const counts: Record<DecisionName, number> = {
      PAID: 0,
      NOT_PAID: 0,
      WAIT: 0,
      HUMAN: 0,
      RACED: 0,
      CONTRADICTED: 0,
      UNRECORDED: 0,
      ERROR: 0,
    };
    const count = (d: DecisionName) => {
      counts[d] += 1;
      metrics.decisions.inc({ decision: d.toLowerCase() });
    };
    const unresolved = await listAll((pageToken) => deps.proxy().listUnresolved({ pageSize: 500, pageToken }, opts()));
    // One window for every page: a page token is bound to the resolved_since it was issued for.
    const resolvedSince = timestampFromDate(new Date(now().getTime() - deps.contradictionWatchMs));
    const watched =
      deps.contradictionWatchMs > 0
        ? (await listAll((pageToken) => deps.proxy().listNotPaidResolutions({ resolvedSince, pageSize: 500, pageToken }, opts()))).filter(
            // Already flagged: by a late answer that paid, or by an earlier run.
            (s) => !s.contradiction && s.lateAnswer?.state !== SubmissionState.ACCEPTED,
          )
        : [];
    let statementRead = 0;
    let coveredUntil: Date | undefined;
    let statement: Statement | undefined;
    if (unresolved.length + watched.length > 0) {
      const oldest = Math.min(...[...unresolved, ...watched].map((s) => toAmbiguous(s).createdAt.getTime()));
      statement = await readStatement(new Date(oldest - STATEMENT_SLACK_MS), [...unresolved, ...watched]);
      statementRead = statement.read;
      coveredUntil = statement.coveredUntil;
    }

    const left = statement ? await resolveAmbiguous(unresolved, statement, count) : [];
    if (!deps.dryRun) await watchNotPaidVerdicts(watched, statement, count);
    if (deps.unrecordedWatchMs > 0) statementRead += await unrecordedPayments(counts, count);

    const nowMs = now().getTime();
    const oldestLeft = left.length ? Math.max(0, (nowMs - Math.min(...left.map((s) => s.createdAt.getTime()))) / 1000) : 0;
    metrics.unresolved.set(left.length);
    metrics.oldestAge.set(oldestLeft);
    return {
      event: "reconcile_summary",
      dry_run: deps.dryRun,
      unresolved_seen: unresolved.length,
      decisions: counts,
      left_unresolved: left.length,
      oldest_unresolved_age_seconds: Math.round(oldestLeft * 1000) / 1000,
      not_paid_watched: watched.length,
      statement_payments_read: statementRead,
      covered_until: coveredUntil?.toISOString() ?? null,
      duration_ms: Math.round(performance.now() - started),
    };
  };
}
