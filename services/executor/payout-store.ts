/**
 * paydb access for the executor: claiming payouts and the C1 §1.6 resource fence. The only
 * layer of the executor that knows SQL.
 *
 * A claim (claimed_by / claimed_until) is only a hint that keeps executors out of each other's
 * way; it is never a guard. The guard is the fence: every write that matters is conditional on
 * `fence < $token` (taking a payout) or `fence <= $token` (writing its outcome), so a stale
 * executor's write touches 0 rows however late it arrives (INV-07: enforced by paydb, not by
 * the executor).
 *
 * Every statement is named: prepared once per connection, so each call skips parse and plan.
 */
import { groupCommit, type Grouped } from "../shared/db/group-commit.js";
import { isRowRefusal, type Pool } from "../shared/db/pg.js";
import { int8 } from "../shared/domain/int8.js";

export interface ClaimedPayout {
  payoutId: string;
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
  state: "PENDING" | "PROCESSING";
  fence: bigint;
  traceparent: string | null;
  createdAt: Date;
  /** A submission whose answer was lost and which paydb did not know afterwards (migration 017). */
  lostSubmission: { ref: string; at: Date } | undefined;
}

interface ClaimRow {
  payout_id: string;
  account_id: string;
  amount_minor: string;
  currency: string;
  beneficiary: string;
  state: "PENDING" | "PROCESSING";
  fence: string;
  traceparent: string | null;
  created_at: Date;
  lost_submission_ref: string | null;
  lost_submission_at: Date | null;
}

export type TerminalState = "PAID" | "FAILED" | "UNKNOWN" | "NEEDS_ATTENTION";

export interface OutcomeWrite {
  state: TerminalState;
  railReference?: string | null;
  failureReason?: string | null;
  /** NEEDS_ATTENTION: why a human must look (upper-snake), and what was seen. */
  attentionReason?: string;
  attentionDetail?: string;
  /** The submission reference the outcome comes from. */
  submissionRef?: string;
}

/** paydb notifies this channel when a payout becomes payable (migration 021; decision 069). */
export const PAYABLE_CHANNEL = "railfence_payout_payable";

/** Seconds with millisecond precision, as SQL text for make_interval. */
const secs = (ms: number) => (ms / 1000).toFixed(3);

/**
 * Group commit of the fence and the outcome write (decision 068's rule, applied to the executor):
 * the payouts this process's attempts fence (or close) while an earlier statement of the kind is
 * in paydb leave together, as ONE statement with the same per-row rule. undefined: every statement
 * alone (the design before; EXECUTOR_BATCH_MAX=1).
 */
export interface StoreBatching {
  maxBatch: number;
  maxInFlight: number;
  onBatch?: (statement: "fence" | "record", size: number) => void;
}

interface FenceItem {
  payoutId: string;
  token: bigint;
  signature: Uint8Array;
  executorId: string;
  claimMs: number;
}

interface RecordItem {
  payoutId: string;
  token: bigint;
  o: OutcomeWrite;
}

// [rule:fence-sql]
/** C1 §1.6, one payout: fence = token only when fence < token and it is still payable; the
 * previous fence read under the row lock. */
const FENCE_ONE = `UPDATE payouts p
    SET fence = $2, fence_signature = $5, state = 'PROCESSING', claimed_by = $3,
        claimed_until = now() + make_interval(secs => $4::float8), updated_at = now()
   FROM (SELECT payout_id, fence AS previous_fence FROM payouts WHERE payout_id = $1 FOR UPDATE) prev
  WHERE p.payout_id = prev.payout_id AND p.payout_id = $1
    AND p.fence < $2 AND p.state IN ('PENDING', 'PROCESSING')
  RETURNING prev.previous_fence`;
// [/rule:fence-sql]

// [rule:executor-record-sql]
/** The outcome on the row fenced by the same token (`fence <= $token`), from the states given. */
const RECORD_ONE = (from: string) => `UPDATE payouts
    SET state = $3, rail_reference = COALESCE($4, rail_reference), failure_reason = $5,
        submission_ref = COALESCE($6, submission_ref),
        attention_reason = COALESCE($7, attention_reason), attention_detail = COALESCE($8, attention_detail),
        attention_at = CASE WHEN $7::text IS NULL THEN attention_at ELSE now() END,
        claimed_by = NULL, claimed_until = NULL, updated_at = now()
  WHERE payout_id = $1 AND fence <= $2 AND state IN ${from}
  RETURNING EXTRACT(EPOCH FROM now() - created_at)::float8 AS age`;
// [/rule:executor-record-sql]

// [rule:fence-group-sql]
/** The fence statement for a group: the same rule per row (fence < token, still payable), the rows
 * locked in payout order; each row's previous fence read under that lock. */
const FENCE_GROUP = `
  WITH asked AS (
    SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::float8[], $5::bytea[]) AS a(payout_id, token, executor_id, claim_secs, signature)),
  prev AS (
    SELECT p.payout_id, p.fence AS previous_fence FROM payouts p JOIN asked a ON a.payout_id = p.payout_id ORDER BY p.payout_id FOR UPDATE OF p)
  UPDATE payouts p
     SET fence = a.token, fence_signature = a.signature, state = 'PROCESSING', claimed_by = a.executor_id,
         claimed_until = now() + make_interval(secs => a.claim_secs), updated_at = now()
    FROM asked a JOIN prev ON prev.payout_id = a.payout_id
   WHERE p.payout_id = a.payout_id AND p.fence < a.token AND p.state IN ('PENDING', 'PROCESSING')
  RETURNING p.payout_id, prev.previous_fence`;
// [/rule:fence-group-sql]

// [rule:executor-record-group-sql]
/** The outcome write for a group: per row the rule of recordOutcome (fence <= token; UNKNOWN only
 * over a payout still in flight, a final state also over UNKNOWN). */
const RECORD_GROUP = `
  WITH w AS (
    SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
      AS w(payout_id, token, state, rail_reference, failure_reason, submission_ref, attention_reason, attention_detail)),
  locked AS (SELECT p.payout_id FROM payouts p JOIN w ON w.payout_id = p.payout_id ORDER BY p.payout_id FOR UPDATE OF p)
  UPDATE payouts p
     SET state = w.state, rail_reference = COALESCE(w.rail_reference, p.rail_reference), failure_reason = w.failure_reason,
         submission_ref = COALESCE(w.submission_ref, p.submission_ref),
         attention_reason = COALESCE(w.attention_reason, p.attention_reason), attention_detail = COALESCE(w.attention_detail, p.attention_detail),
         attention_at = CASE WHEN w.attention_reason IS NULL THEN p.attention_at ELSE now() END,
         claimed_by = NULL, claimed_until = NULL, updated_at = now()
    FROM w JOIN locked ON locked.payout_id = w.payout_id
   WHERE p.payout_id = w.payout_id AND p.fence <= w.token
     AND (p.state IN ('PENDING', 'PROCESSING') OR (w.state <> 'UNKNOWN' AND p.state = 'UNKNOWN'))
  RETURNING p.payout_id, EXTRACT(EPOCH FROM now() - p.created_at)::float8 AS age`;
// [/rule:executor-record-group-sql]

// [rule:fence-next-sql]
/** Claim and fence in one (decision 075): the account's oldest payable payout nobody holds a live
 * claim on, taken under the token by the per-row rule of FENCE_ONE (fence < token, still payable),
 * its previous fence read under the row lock. Which payout is only a hint, as a claim is. The pick
 * is MATERIALIZED: a LIMIT 1 .. SKIP LOCKED subquery that the plan may run more than once (a
 * rescan) picks another row each time, and one token fenced two payouts (the test caught it). */
const FENCE_NEXT = `
  WITH prev AS MATERIALIZED (
    SELECT payout_id, fence AS previous_fence FROM payouts
     WHERE account_id = $1 AND state IN ('PENDING', 'PROCESSING') AND (claimed_until IS NULL OR claimed_until < now())
       AND fence < $2
     ORDER BY created_at, payout_id
     LIMIT 1
     FOR UPDATE SKIP LOCKED)
  UPDATE payouts p
    SET fence = $2, fence_signature = $5, state = 'PROCESSING', claimed_by = $3,
        claimed_until = now() + make_interval(secs => $4::float8), updated_at = now()
   FROM prev
  WHERE p.payout_id = prev.payout_id
    AND p.fence < $2 AND p.state IN ('PENDING', 'PROCESSING')
  RETURNING p.payout_id, p.account_id, p.amount_minor, p.currency, p.beneficiary, p.state, p.fence, p.traceparent, p.created_at,
            p.lost_submission_ref, p.lost_submission_at, prev.previous_fence`;
// [/rule:fence-next-sql]

const claimedPayout = (r: ClaimRow): ClaimedPayout => ({
  payoutId: r.payout_id,
  accountId: r.account_id,
  amountMinor: int8(r.amount_minor),
  currency: r.currency,
  beneficiary: r.beneficiary,
  state: r.state,
  fence: int8(r.fence),
  traceparent: r.traceparent,
  createdAt: r.created_at,
  lostSubmission: r.lost_submission_ref && r.lost_submission_at ? { ref: r.lost_submission_ref, at: r.lost_submission_at } : undefined,
});

/** Two items for one payout in a group would be one row updated once: such a group runs item by item. */
const distinctPayouts = (items: Array<{ payoutId: string }>) => new Set(items.map((i) => i.payoutId)).size === items.length;

export function createPayoutStore(pool: Pool, batching?: StoreBatching) {
  async function fenceAlone(f: FenceItem): Promise<{ previousFence: bigint } | undefined> {
    const { rows } = await pool.query<{ previous_fence: string }>({
      name: "executor_fence",
      // With signed tokens paydb checks the signature against the fence itself (migration 014).
      text: FENCE_ONE,
      values: [f.payoutId, f.token.toString(), f.executorId, secs(f.claimMs), f.signature.length ? Buffer.from(f.signature) : null],
    });
    return rows[0] ? { previousFence: int8(rows[0].previous_fence) } : undefined;
  }

  async function fenceGroup(items: FenceItem[]): Promise<Array<{ previousFence: bigint } | undefined>> {
    // A group of one, or one payout twice, is run item by item (for one: exactly the one-item statement).
    if (items.length === 1 || !distinctPayouts(items)) return Promise.all(items.map(fenceAlone));
    const { rows } = await pool.query<{ payout_id: string; previous_fence: string }>({
      name: "executor_fence_group",
      text: FENCE_GROUP,
      values: [
        items.map((f) => f.payoutId),
        items.map((f) => f.token.toString()),
        items.map((f) => f.executorId),
        items.map((f) => f.claimMs / 1000),
        items.map((f) => (f.signature.length ? Buffer.from(f.signature) : null)),
      ],
    });
    const fenced = new Map(rows.map((r) => [r.payout_id, int8(r.previous_fence)]));
    return items.map((f) => (fenced.has(f.payoutId) ? { previousFence: fenced.get(f.payoutId)! } : undefined));
  }

  const recordValues = (payoutId: string, token: bigint, o: OutcomeWrite) => {
    const attention = o.state === "NEEDS_ATTENTION";
    return [
      payoutId,
      token.toString(),
      o.state,
      o.railReference ?? null,
      o.failureReason ?? null,
      o.submissionRef ?? null,
      attention ? (o.attentionReason ?? "UNSPECIFIED") : null,
      attention ? (o.attentionDetail ?? null) : null,
    ];
  };

  async function recordAlone({ payoutId, token, o }: RecordItem): Promise<{ ageSeconds: number } | undefined> {
    const from = o.state === "UNKNOWN" ? "('PENDING', 'PROCESSING')" : "('PENDING', 'PROCESSING', 'UNKNOWN')";
    const { rows } = await pool.query<{ age: number }>({
      // One prepared statement per text (the states it may overwrite differ).
      name: o.state === "UNKNOWN" ? "executor_record_unknown" : "executor_record_final",
      text: RECORD_ONE(from),
      values: recordValues(payoutId, token, o),
    });
    return rows[0] ? { ageSeconds: rows[0].age } : undefined;
  }

  async function recordGroup(items: RecordItem[]): Promise<Array<{ ageSeconds: number } | undefined>> {
    if (items.length === 1 || !distinctPayouts(items)) return Promise.all(items.map(recordAlone));
    const columns = items.map((i) => recordValues(i.payoutId, i.token, i.o));
    const { rows } = await pool.query<{ payout_id: string; age: number }>({
      name: "executor_record_group",
      text: RECORD_GROUP,
      values: columns[0]!.map((_, k) => columns.map((c) => c[k])),
    });
    const recorded = new Map(rows.map((r) => [r.payout_id, r.age]));
    return items.map((i) => (recorded.has(i.payoutId) ? { ageSeconds: recorded.get(i.payoutId)! } : undefined));
  }

  // A group refused for one row's sake (a trigger: a forged signature, an UNKNOWN the ledger does
  // not back) runs item by item, so the refusal is that attempt's alone.
  const grouped = batching !== undefined && batching.maxBatch > 1;
  const fenceGrouped: Grouped<FenceItem, { previousFence: bigint } | undefined> | undefined = grouped
    ? groupCommit(fenceGroup, {
        maxBatch: batching.maxBatch,
        maxInFlight: batching.maxInFlight,
        onBatch: (n) => batching.onBatch?.("fence", n),
        alone: { run: fenceAlone, when: isRowRefusal },
      })
    : undefined;
  const recordGrouped: Grouped<RecordItem, { ageSeconds: number } | undefined> | undefined = grouped
    ? groupCommit(recordGroup, {
        maxBatch: batching.maxBatch,
        maxInFlight: batching.maxInFlight,
        onBatch: (n) => batching.onBatch?.("record", n),
        alone: { run: recordAlone, when: isRowRefusal },
      })
    : undefined;

  return {
    /**
     * Claims up to `limit` payouts nobody is working on: PENDING ones, and PROCESSING ones whose
     * claim has lapsed (an executor died or stalled; fencing keeps taking them over safe).
     * SKIP LOCKED lets concurrent executors claim disjoint sets without waiting on each other.
     */
    async claim(executorId: string, limit: number, claimMs: number): Promise<ClaimedPayout[]> {
      const { rows } = await pool.query<ClaimRow>({
        name: "executor_claim",
        text: `WITH picked AS (
           SELECT payout_id FROM payouts
            WHERE state IN ('PENDING', 'PROCESSING') AND (claimed_until IS NULL OR claimed_until < now())
            ORDER BY created_at, payout_id
            LIMIT $1
            FOR UPDATE SKIP LOCKED)
         UPDATE payouts p
            SET claimed_by = $2, claimed_until = now() + make_interval(secs => $3::float8), updated_at = now()
           FROM picked WHERE p.payout_id = picked.payout_id
         RETURNING p.payout_id, p.account_id, p.amount_minor, p.currency, p.beneficiary, p.state, p.fence, p.traceparent, p.created_at,
                   p.lost_submission_ref, p.lost_submission_at`,
        values: [limit, executorId, secs(claimMs)],
      });
      return rows.map(claimedPayout).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
    },

    /**
     * The executors listening for payable payouts now (their LISTEN sessions' application names,
     * `executor/<id>/listener`): who shares the notifications (decision 073). A read, no guard.
     */
    async listeningExecutors(): Promise<string[]> {
      const { rows } = await pool.query<{ application_name: string }>({
        name: "executor_listening_executors",
        text: `SELECT application_name FROM pg_stat_activity
                WHERE datname = current_database() AND application_name LIKE 'executor/%/listener'`,
      });
      return rows.map((r) => r.application_name);
    },

    /**
     * Claim and fence in one statement (decision 075): the oldest payable payout of the account
     * whose lock `token` comes from, taken under it. undefined: none to take (another executor
     * holds a live claim on each, or there is none, or each is fenced at or above `token`).
     */
    async fenceNext(
      accountId: string,
      token: bigint,
      signature: Uint8Array,
      executorId: string,
      claimMs: number,
    ): Promise<{ payout: ClaimedPayout; previousFence: bigint } | undefined> {
      const { rows } = await pool.query<ClaimRow & { previous_fence: string }>({
        name: "executor_fence_next",
        text: FENCE_NEXT,
        values: [accountId, token.toString(), executorId, secs(claimMs), signature.length ? Buffer.from(signature) : null],
      });
      if (rows.length > 1) throw new Error(`executor_fence_next took ${rows.length} payouts of one account under one token`);
      const r = rows[0];
      return r ? { payout: claimedPayout(r), previousFence: int8(r.previous_fence) } : undefined;
    },

    /**
     * C1 §1.6: takes the payout under `token`. 0 rows (undefined) = fenced out: a holder with a
     * newer token already owns it, or it is no longer payable. Returns the fence it replaced, so
     * the caller knows whether an earlier holder may already have submitted it.
     */
    async fence(payoutId: string, token: bigint, signature: Uint8Array, executorId: string, claimMs: number): Promise<{ previousFence: bigint } | undefined> {
      const item = { payoutId, token, signature, executorId, claimMs };
      return fenceGrouped ? fenceGrouped(item) : fenceAlone(item);
    },

    /**
     * Records the outcome on the row fenced by the same token (`fence <= $token`). A terminal
     * PAID/FAILED written by someone else (the reconciler) is never overwritten, and UNKNOWN is
     * only written over a payout still in flight. Returns the payout's end-to-end age in seconds
     * (created_at -> now), or undefined when fenced out.
     */
    async recordOutcome(payoutId: string, token: bigint, o: OutcomeWrite): Promise<{ ageSeconds: number } | undefined> {
      const item = { payoutId, token, o };
      return recordGrouped ? recordGrouped(item) : recordAlone(item);
    },

    /** The payout's fence while it is still payable (PENDING, PROCESSING), else undefined. */
    async payableFence(payoutId: string): Promise<bigint | undefined> {
      const { rows } = await pool.query<{ fence: string }>({
        name: "executor_payable_fence",
        text: "SELECT fence FROM payouts WHERE payout_id = $1 AND state IN ('PENDING', 'PROCESSING')",
        values: [payoutId],
      });
      return rows[0] ? int8(rows[0].fence) : undefined;
    },

    /** The payout's state (undefined: no such payout). */
    async stateOf(payoutId: string): Promise<string | undefined> {
      const { rows } = await pool.query<{ state: string }>({
        name: "executor_payout_state",
        text: "SELECT state FROM payouts WHERE payout_id = $1",
        values: [payoutId],
      });
      return rows[0]?.state;
    },

    /**
     * Flags a payout whose fence `fence` is above `lastToken`, the highest token the lock has ever
     * issued for its account: no holder can have fenced it that high (a forged fence, or a lock
     * that went backwards). NEEDS_ATTENTION, never fenced out for ever. Only while the fence is
     * still the one read (a newer holder's fence is never flagged). Returns true when flagged.
     */
    async flagFenceAhead(payoutId: string, fence: bigint, lastToken: bigint): Promise<boolean> {
      const { rowCount } = await pool.query({
        name: "executor_flag_fence_ahead",
        text: `UPDATE payouts
            SET state = 'NEEDS_ATTENTION', attention_reason = 'FENCE_AHEAD_OF_LOCK',
                attention_detail = 'fence ' || fence || ' is above the highest token the lock ever issued for the account (' || $3 || ')',
                attention_at = now(), claimed_by = NULL, claimed_until = NULL, updated_at = now()
          WHERE payout_id = $1 AND fence = $2 AND fence > $3 AND state IN ('PENDING', 'PROCESSING')`,
        values: [payoutId, fence.toString(), lastToken.toString()],
      });
      return rowCount === 1;
    },

    /**
     * Gives a payout back for a later attempt after `retryAfterMs`. Only the executor's own claim
     * is touched: a holder with a newer fence keeps its claim.
     */
    async deferClaim(payoutId: string, executorId: string, fenceAtMost: bigint, retryAfterMs: number): Promise<void> {
      await pool.query({
        name: "executor_defer",
        text: `UPDATE payouts SET claimed_by = NULL, claimed_until = now() + make_interval(secs => $4::float8), updated_at = now()
          WHERE payout_id = $1 AND claimed_by = $2 AND fence <= $3 AND state IN ('PENDING', 'PROCESSING')`,
        values: [payoutId, executorId, fenceAtMost.toString(), secs(retryAfterMs)],
      });
    },

    /**
     * Records a submission whose answer was lost and which paydb then did not know: from now on
     * the payout is paid again only once the rail's statement shows nothing for it (decision 023).
     * The first such record stays (its time is the earliest the request can have left).
     */
    async recordLostSubmission(payoutId: string, fenceAtMost: bigint, reference: string): Promise<void> {
      await pool.query({
        name: "executor_lost_submission",
        text: `UPDATE payouts SET lost_submission_ref = $3, lost_submission_at = now(), updated_at = now()
          WHERE payout_id = $1 AND fence <= $2 AND state IN ('PENDING', 'PROCESSING') AND lost_submission_ref IS NULL`,
        values: [payoutId, fenceAtMost.toString(), reference],
      });
    },

    /** The rail's statement showed nothing for the lost submission long enough after it: cleared. */
    async clearLostSubmission(payoutId: string, fenceAtMost: bigint, reference: string): Promise<void> {
      await pool.query({
        name: "executor_lost_submission_clear",
        text: `UPDATE payouts SET lost_submission_ref = NULL, lost_submission_at = NULL, updated_at = now()
          WHERE payout_id = $1 AND fence <= $2 AND lost_submission_ref = $3`,
        values: [payoutId, fenceAtMost.toString(), reference],
      });
    },
  };
}

export type PayoutStore = ReturnType<typeof createPayoutStore>;
