/**
 * The executor's fencing and outcome writes under group commit (payout-store.ts, decision 068's
 * rule): what this executor's attempts write while an earlier such statement is in paydb leaves as
 * one statement, and every row still obeys its own fence rule (C1 §1.6): a token at or below the
 * payout's fence fences nothing, an outcome is written only by the token that fenced it, UNKNOWN
 * never over a finished payout. Against a real paydb; commits counted by the pool that runs them.
 * Control: EXECUTOR_BATCH_MAX=1 (every write alone) takes one commit per write.
 */
import { describe, expect, it } from "vitest";
import { createPayoutStore } from "../../services/executor/payout-store.js";
import { useMigratedDatabase } from "../support/migrated-database.js";
import { countedPool } from "../support/xact-commits.js";

const db = useMigratedDatabase("paydb_exec_group", "paydb");
const url = db.url;
let n = 0;

async function pendingPayouts(count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => `po-exec-group-${++n}`);
  await db.owner.query(
    `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary)
     SELECT id, 'test-client', 'acc-' || id, 100, 'EUR', 'ben-1' FROM unnest($1::text[]) AS id`,
    [ids],
  );
  return ids;
}

const stateOf = async (id: string) =>
  (await db.owner.query<{ state: string; fence: string }>("SELECT state, fence::text FROM payouts WHERE payout_id = $1", [id])).rows[0]!;

const NO_SIGNATURE = new Uint8Array();
const CLAIM_MS = 60_000;

describe("the executor's writes, grouped", () => {
  it("concurrent fences leave as one statement; each row keeps its own rule and its own previous fence", async () => {
    const counted = await countedPool(url);
    try {
      const sizes: number[] = [];
      const store = createPayoutStore(counted.pool, { maxBatch: 32, maxInFlight: 1, onBatch: (_s, size) => sizes.push(size) });
      const ids = await pendingPayouts(8);
      // ids[1] already held by a newer token (9): token 5 fences nothing there. ids[2] was fenced before by 3.
      await db.owner.query("UPDATE payouts SET fence = 9, state = 'PROCESSING' WHERE payout_id = $1", [ids[1]]);
      await db.owner.query("UPDATE payouts SET fence = 3, state = 'PROCESSING' WHERE payout_id = $1", [ids[2]]);
      const commits = await counted.commitsOf(async () => {
        const results = await Promise.all(ids.map((id) => store.fence(id, 5n, NO_SIGNATURE, "exec-1", CLAIM_MS)));
        expect(results).toEqual(ids.map((_, i) => (i === 1 ? undefined : { previousFence: i === 2 ? 3n : 0n })));
      });
      // The first leaves alone; the seven that arrived meanwhile leave together.
      expect(sizes).toEqual([1, 7]);
      expect(commits).toBe(2);
      expect(await stateOf(ids[0]!)).toEqual({ state: "PROCESSING", fence: "5" });
      expect(await stateOf(ids[1]!)).toEqual({ state: "PROCESSING", fence: "9" });
    } finally {
      await counted.end();
    }
  });

  it("concurrent outcomes leave as one statement; a stale token and an UNKNOWN over a finished payout write nothing", async () => {
    const counted = await countedPool(url);
    try {
      const sizes: number[] = [];
      const store = createPayoutStore(counted.pool, { maxBatch: 32, maxInFlight: 1, onBatch: (_s, size) => sizes.push(size) });
      const ids = await pendingPayouts(6);
      for (const id of ids) expect(await store.fence(id, 5n, NO_SIGNATURE, "exec-1", CLAIM_MS)).toBeDefined();
      // ids[3] taken over by token 7 since: token 5's outcome is fenced out.
      expect(await store.fence(ids[3]!, 7n, NO_SIGNATURE, "exec-2", CLAIM_MS)).toEqual({ previousFence: 5n });
      sizes.length = 0;
      const writes = [
        store.recordOutcome(ids[0]!, 5n, { state: "PAID", railReference: "rr-0", submissionRef: ids[0] }),
        store.recordOutcome(ids[1]!, 5n, { state: "PAID", railReference: "rr-1", submissionRef: ids[1] }),
        store.recordOutcome(ids[2]!, 5n, { state: "FAILED", failureReason: "RAIL_REJECTED" }),
        store.recordOutcome(ids[3]!, 5n, { state: "PAID", railReference: "rr-3" }),
        store.recordOutcome(ids[4]!, 5n, { state: "NEEDS_ATTENTION", attentionReason: "TEST", attentionDetail: "planted" }),
      ];
      const results = await Promise.all(writes);
      expect(results.map((r) => r !== undefined)).toEqual([true, true, true, false, true]);
      expect(sizes).toEqual([1, 4]);
      expect((await stateOf(ids[3]!)).state).toBe("PROCESSING");
      expect((await stateOf(ids[4]!)).state).toBe("NEEDS_ATTENTION");
      // UNKNOWN is written only over a payout still in flight: never over PAID, alone or grouped.
      const late = await Promise.all([
        store.recordOutcome(ids[0]!, 5n, { state: "UNKNOWN" }),
        store.recordOutcome(ids[5]!, 5n, { state: "FAILED", failureReason: "X" }),
      ]);
      expect(late.map((r) => r !== undefined)).toEqual([false, true]);
      expect((await stateOf(ids[0]!)).state).toBe("PAID");
    } finally {
      await counted.end();
    }
  });

  it("eight concurrent fences: two commits grouped, eight with EXECUTOR_BATCH_MAX=1 (the control)", async () => {
    const commitsFor = async (maxBatch: number) => {
      const counted = await countedPool(url);
      try {
        const store = createPayoutStore(counted.pool, { maxBatch, maxInFlight: 1 });
        const ids = await pendingPayouts(8);
        return await counted.commitsOf(() => Promise.all(ids.map((id) => store.fence(id, 5n, NO_SIGNATURE, "exec-1", CLAIM_MS))));
      } finally {
        await counted.end();
      }
    };
    expect(await commitsFor(32)).toBe(2);
    expect(await commitsFor(1)).toBe(8);
  });
});
