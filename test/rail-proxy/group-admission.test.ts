/**
 * Group admission (decision 068, migration 023) against a real paydb: the submissions that arrive
 * while an admission statement is in paydb are admitted together, in one statement and one
 * commit, and each keeps its own outcome: a duplicate or a second live submission refuses only
 * itself (its mark advance rolled back with it), a stale token is FENCED_OUT while the others
 * pass, and the mark each item is judged by is the one the items before it left, never a snapshot.
 *
 * Commits are counted by the pool that runs the work (test/support/xact-commits.ts: the count every
 * railfence pool keeps of the transactions PostgreSQL reports ended).
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createSubmissionStore, intentArrays, type Intent } from "../../services/rail-proxy/submission-store.js";
import { fencedByExecutor } from "../support/fenced-payout.js";
import { useMigratedDatabase } from "../support/migrated-database.js";
import { countedPool } from "../support/xact-commits.js";

const db = useMigratedDatabase("paydb_group", "paydb");
const url = db.url;
let n = 0;

/** A payout created PENDING and fenced by `token`, as an executor leaves it; its intent. */
async function fencedIntent(accountId: string, token: bigint, reference?: string): Promise<Intent> {
  const payoutId = `po-group-${++n}`;
  await db.owner.query(
    `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state)
     VALUES ($1, 'test-client', $2, 100, 'EUR', 'ben-1', 'PENDING')`,
    [payoutId, accountId],
  );
  await fencedByExecutor(db.owner, payoutId, token);
  return { reference: reference ?? payoutId, payoutId, accountId, token, amountMinor: 100n, currency: "EUR", beneficiary: "ben-1", replicaId: "r-test" };
}

const account = () => `acc-group-${++n}`;

/** One group admission statement, as the proxy sends it (submission-store.ts). */
async function admitGroup(db: pg.ClientBase | pg.Pool, items: Intent[]) {
  const { rows } = await db.query<{ ord: number; outcome: string; detail: string | null }>(
    "SELECT ord, outcome, detail FROM rail_admit_batch($1, $2, $3, $4, $5, $6, $7, $8) ORDER BY ord",
    intentArrays(items),
  );
  return rows.map((r) => (r.detail === null ? r.outcome : `${r.outcome}:${r.detail}`));
}

const markOf = async (accountId: string) =>
  (await db.owner.query<{ mark: string }>("SELECT mark::text FROM rail_high_water WHERE account_id = $1", [accountId])).rows[0]?.mark;
const rowsOf = async (references: string[]) =>
  (await db.owner.query<{ payout_id: string }>("SELECT payout_id FROM rail_submissions WHERE payout_id = ANY($1) ORDER BY payout_id", [references])).rows.map(
    (r) => r.payout_id,
  );

describe("rail_admit_batch", () => {
  it("admits N submissions with one statement and one commit; one statement per submission takes N commits (the control)", async () => {
    const N = 12;
    const counted = await countedPool(url);
    try {
      const together = await Promise.all(Array.from({ length: N }, () => fencedIntent(account(), 7n)));
      const client = counted.pool;
      const grouped = await counted.commitsOf(async () => expect(await admitGroup(client, together)).toEqual(Array(N).fill("ADMITTED")));
      const apart = await Promise.all(Array.from({ length: N }, () => fencedIntent(account(), 7n)));
      const alone = await counted.commitsOf(async () => {
        for (const i of apart) {
          const values = intentArrays([i]).map((v) => (Array.isArray(v) ? v[0] : v));
          const { rows } = await client.query("SELECT outcome FROM rail_admit($1, $2, $3, $4, $5, $6, $7, $8)", values);
          expect(rows[0]!.outcome).toBe("ADMITTED");
        }
      });
      expect({ grouped, alone }).toEqual({ grouped: 1, alone: N });
    } finally {
      await counted.end();
    }
  });

  it("a duplicate inside a group refuses only itself: the others are admitted, the duplicate's mark advance is rolled back", async () => {
    const first = await fencedIntent(account(), 4n);
    const other = await fencedIntent(account(), 9n);
    // The same reference again in the same group, under a higher token of another account (its
    // mark would advance if the item were not rolled back whole).
    const dupAccount = account();
    const duplicate = { ...(await fencedIntent(dupAccount, 6n)), reference: first.reference };
    expect(await admitGroup(db.owner, [first, other, duplicate])).toEqual(["ADMITTED", "ADMITTED", "DUPLICATE"]);
    expect(await rowsOf([first.reference, other.reference])).toEqual([first.reference, other.reference].sort());
    expect(await markOf(dupAccount)).toBeUndefined();
    expect(await markOf(other.accountId)).toBe("9");
  });

  it("a second live submission of a payout inside a group refuses only itself, names the live one, and leaves the mark as it was", async () => {
    const live = await fencedIntent(account(), 3n);
    expect(await admitGroup(db.owner, [live])).toEqual(["ADMITTED"]);
    // A new holder takes the payout over (token 5) and submits it again under another reference.
    await fencedByExecutor(db.owner, live.payoutId, 5n);
    const again = { ...live, reference: `${live.payoutId}:t5`, token: 5n };
    const before = await fencedIntent(account(), 2n);
    const after = await fencedIntent(account(), 2n);
    expect(await admitGroup(db.owner, [before, again, after])).toEqual(["ADMITTED", `PAYOUT_ALREADY_SUBMITTED:${live.reference}`, "ADMITTED"]);
    expect(await markOf(live.accountId)).toBe("3");
    expect(await rowsOf([before.reference, again.reference, after.reference])).toEqual([before.reference, after.reference].sort());
  });

  it("a stale token inside a group is FENCED_OUT while the others pass; each item is judged by the mark the items before it left", async () => {
    const acc = account();
    const current = await fencedIntent(acc, 5n);
    expect(await admitGroup(db.owner, [current])).toEqual(["ADMITTED"]);
    // A paused holder's token 3 (below the mark 5), another account, and the account's next holder.
    const stale = await fencedIntent(acc, 3n);
    const elsewhere = await fencedIntent(account(), 1n);
    const next = await fencedIntent(acc, 8n);
    expect(await admitGroup(db.owner, [stale, elsewhere, next])).toEqual(["FENCED_OUT", "ADMITTED", "ADMITTED"]);
    expect(await markOf(acc)).toBe("8");
    // Within one group: token 11 first, then 10. A snapshot of the mark taken for the whole group
    // (8) would admit both, the second below the first; each item sees the mark the first left.
    const high = await fencedIntent(acc, 11n);
    const lower = await fencedIntent(acc, 10n);
    expect(await admitGroup(db.owner, [high, lower])).toEqual(["ADMITTED", "FENCED_OUT"]);
    expect(await markOf(acc)).toBe("11");
    expect(await rowsOf([stale.reference, lower.reference])).toEqual([]);
  });

  it("the proxy's role may run it; nobody else may", async () => {
    const { rows } = await db.owner.query<{ proxy: boolean; executor: boolean; payouts: boolean }>(
      `SELECT has_function_privilege('railfence_rail_proxy', 'rail_admit_batch(text[], text[], text[], bigint[], bigint[], text[], text[], text)', 'EXECUTE') AS proxy,
              has_function_privilege('railfence_executor', 'rail_admit_batch(text[], text[], text[], bigint[], bigint[], text[], text[], text)', 'EXECUTE') AS executor,
              has_function_privilege('railfence_payouts', 'rail_admit_batch(text[], text[], text[], bigint[], bigint[], text[], text[], text)', 'EXECUTE') AS payouts`,
    );
    expect(rows[0]).toEqual({ proxy: true, executor: false, payouts: false });
  });
});

describe("the store's group admission (natural batching)", () => {
  const storeOn = (pool: pg.Pool, sizes: number[]) =>
    createSubmissionStore(pool, 60_000, undefined, { maxBatch: 64, maxInFlight: 1, onAdmissionBatch: (s) => sizes.push(s) });

  it("admissions arriving while one is in paydb leave together as the next group; each caller gets its own outcome", async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const sizes: number[] = [];
      const store = storeOn(pool, sizes);
      const acc = account();
      const stale = await fencedIntent(acc, 2n);
      const current = await fencedIntent(acc, 6n);
      const others = await Promise.all(Array.from({ length: 18 }, () => fencedIntent(account(), 1n)));
      // others[0]'s reference again, for another account's payout, in the same group: of the two,
      // whichever the group runs first (it orders by account) is admitted, the other alone is DUPLICATE.
      const duplicate = { ...(await fencedIntent(account(), 1n)), reference: others[0]!.reference };
      // The first leaves alone at once; the rest arrive while it is in paydb and form one group.
      const results = await Promise.all([store.admit(current), store.admit(stale), ...others.map((o) => store.admit(o)), store.admit(duplicate)]);
      expect(sizes).toEqual([1, 20]);
      const kinds = results.map((r) => r.kind);
      expect(kinds.slice(0, 2)).toEqual(["ADMITTED", "FENCED_OUT"]);
      expect(kinds.slice(3, 19)).toEqual(Array(16).fill("ADMITTED"));
      expect([kinds[2], kinds[20]].sort()).toEqual(["ADMITTED", "DUPLICATE"]);
      const row = await db.owner.query<{ bound_payout_id: string }>("SELECT bound_payout_id FROM rail_submissions WHERE payout_id = $1", [duplicate.reference]);
      expect(row.rows[0]!.bound_payout_id).toBe(kinds[2] === "ADMITTED" ? others[0]!.payoutId : duplicate.payoutId);
    } finally {
      await pool.end();
    }
  });

  it("at low load nothing waits: one admission at a time leaves alone, at once", async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const sizes: number[] = [];
      const store = storeOn(pool, sizes);
      for (let i = 0; i < 5; i++) expect((await store.admit(await fencedIntent(account(), 1n))).kind).toBe("ADMITTED");
      expect(sizes).toEqual([1, 1, 1, 1, 1]);
    } finally {
      await pool.end();
    }
  });

  it("20 concurrent admissions: two commits with group admission, twenty without (the control: ADMISSION_BATCH_MAX=1)", async () => {
    const count = async (batching: boolean) => {
      const counted = await countedPool(url);
      try {
        const store = batching ? storeOn(counted.pool, []) : createSubmissionStore(counted.pool, 60_000, undefined, { maxBatch: 1, maxInFlight: 1 });
        const items = await Promise.all(Array.from({ length: 20 }, () => fencedIntent(account(), 1n)));
        return await counted.commitsOf(async () => {
          const results = await Promise.all(items.map((i) => store.admit(i)));
          expect(results.every((r) => r.kind === "ADMITTED")).toBe(true);
        });
      } finally {
        await counted.end();
      }
    };
    expect(await count(true)).toBe(2);
    expect(await count(false)).toBe(20);
  });

  it("outcomes are recorded the same way: one statement for what arrives together, each row its own answer", async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const outcomeSizes: number[] = [];
      const store = createSubmissionStore(pool, 60_000, undefined, { maxBatch: 64, maxInFlight: 1, onOutcomeBatch: (s) => outcomeSizes.push(s) });
      const items = await Promise.all(Array.from({ length: 6 }, () => fencedIntent(account(), 1n)));
      for (const i of items) expect((await store.admit(i)).kind).toBe("ADMITTED");
      const answers = ["ACCEPTED", "REJECTED", "TIMEOUT", "ACCEPTED", "REJECTED", "ACCEPTED"] as const;
      const rows = await Promise.all(
        items.map((i, k) => store.recordOutcome(i.reference, answers[k]!, `rr-${k}`, null, answers[k] === "TIMEOUT" ? "RAIL_DEADLINE" : null, 3)),
      );
      expect(rows.map((r) => [r?.payout_id, r?.state, r?.rail_reference, r?.ambiguous])).toEqual(
        items.map((i, k) => [i.reference, answers[k], `rr-${k}`, answers[k] === "TIMEOUT"]),
      );
      expect(outcomeSizes).toEqual([1, 5]);
      // A row no longer waiting for an answer (already ACCEPTED) is not rewritten: undefined, alone in its group.
      expect(await store.recordOutcome(items[0]!.reference, "REJECTED", "rr-x", null, null, 3)).toBeUndefined();
    } finally {
      await pool.end();
    }
  });
});
