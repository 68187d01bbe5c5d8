/**
 * Migration 021: paydb announces a payout that becomes payable (decision 069), and only then;
 * migration 025: the announcement names the payout's account (decision 075), and the executor's
 * claim-and-fence statement takes that account's oldest payable payout by the fence's rule.
 * Each write runs as the role that makes it in production (payouts creates, the executor claims,
 * defers, gives back and closes, the owner reopens), with the executor's own SQL; the listener is
 * the executor's role too (LISTEN needs no grant). Notifications are counted exactly: a query on
 * the listening session after a commit returns only once every notification committed before
 * it has been delivered.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { createPayoutStore, PAYABLE_CHANNEL, type PayoutStore } from "../../services/executor/payout-store.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { allowServiceLogins, ownedDatabase, serviceUrl } from "../../tools/harness/database-roles.js";
import { uniqueSuffix } from "../support/test-mesh.js";

const admin = inject("pgUrl");
const name = `migwake${uniqueSuffix()}`;
const EXEC = "exec-wake";

let listener: pg.Client;
let owner: pg.Pool;
let payouts: pg.Pool;
let executorPool: pg.Pool;
let store: PayoutStore;
const heard: Array<string | undefined> = [];

/** Notifications delivered since the last call. */
async function announced(): Promise<Array<string | undefined>> {
  await listener.query("SELECT 1");
  return heard.splice(0);
}

beforeAll(async () => {
  const { url, migrateUrl } = await ownedDatabase(admin, name);
  await migrate(migrateUrl, "paydb");
  await allowServiceLogins(admin);
  owner = new pg.Pool({ connectionString: migrateUrl, max: 1 });
  payouts = new pg.Pool({ connectionString: serviceUrl(url, "payouts"), max: 1 });
  executorPool = new pg.Pool({ connectionString: serviceUrl(url, "executor"), max: 2 });
  store = createPayoutStore(executorPool);
  listener = new pg.Client({ connectionString: serviceUrl(url, "executor") });
  await listener.connect();
  listener.on("notification", (m) => {
    if (m.channel === PAYABLE_CHANNEL) heard.push(m.payload);
  });
  await listener.query(`LISTEN ${PAYABLE_CHANNEL}`);
});

afterAll(async () => {
  await listener?.end();
  await Promise.all([owner, payouts, executorPool].map((p) => p?.end()));
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await c.end();
});

const insert = (db: pg.ClientBase | pg.Pool, id: string, account: string) =>
  db.query(
    "INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, idempotency_key) VALUES ($1, 'client-1', $2, 100, 'EUR', 'ben', $1)",
    [id, account],
  );

describe("migration 021: payable payouts are announced", () => {
  it("announces creation once per account and transaction, naming the account, on commit; not claims, fences, later retries or outcomes; a claim given back at once and a reopening are", async () => {
    // Four payouts of three accounts in one transaction: one notification per account, after COMMIT.
    const tx = await payouts.connect();
    try {
      await tx.query("BEGIN");
      for (const id of ["po-a", "po-b", "po-c"]) await insert(tx, id, `acc-${id}`);
      await insert(tx, "po-a2", "acc-po-a");
      expect(await announced()).toEqual([]);
      await tx.query("COMMIT");
    } finally {
      tx.release();
    }
    expect(await announced()).toEqual(["acc-po-a", "acc-po-b", "acc-po-c"]);
    await store.deferClaim("po-a2", EXEC, 0n, 60_000);

    // Claimed: not payable by anyone else now.
    expect(await store.claim(EXEC, 3, 10_000)).toHaveLength(3);
    expect(await announced()).toEqual([]);

    // Deferred to later: payable then, but no write happens then; the poll's to find.
    await store.deferClaim("po-a", EXEC, 0n, 5000);
    expect(await announced()).toEqual([]);

    // Given back at once (an executor draining): payable now.
    await store.deferClaim("po-b", EXEC, 0n, 0);
    expect(await announced()).toEqual(["acc-po-b"]);

    // Fenced, then closed: never announced.
    expect(await store.fence("po-c", 1n, new Uint8Array(), EXEC, 10_000)).toEqual({ previousFence: 0n });
    expect(await store.recordOutcome("po-c", 1n, { state: "FAILED", failureReason: "RAIL_REJECTED" })).toBeDefined();
    expect(await announced()).toEqual([]);

    // Reopened by the owner (what reopen_payout does to the row): payable again.
    await owner.query("UPDATE payouts SET state = 'PENDING', failure_reason = NULL, claimed_by = NULL, claimed_until = NULL WHERE payout_id = 'po-c'");
    expect(await announced()).toEqual(["acc-po-c"]);
  });
});

describe("the executor's claim-and-fence (FENCE_NEXT, decision 075)", () => {
  const none = new Uint8Array();

  it("takes the account's oldest payable payout with no live claim, under the token, and nothing of another account", async () => {
    for (const [id, account] of [
      ["fn-1", "acc-fn"],
      ["fn-2", "acc-fn"],
      ["fn-3", "acc-fn"],
      ["fn-other", "acc-fn-other"],
    ] as const)
      await insert(payouts, id, account);
    // fn-1 claimed by someone else (a live claim): left to them.
    await executorPool.query("UPDATE payouts SET claimed_by = 'exec-other', claimed_until = now() + interval '1 minute' WHERE payout_id = 'fn-1'");
    const first = await store.fenceNext("acc-fn", 5n, none, EXEC, 10_000);
    expect(first?.payout).toMatchObject({ payoutId: "fn-2", accountId: "acc-fn", amountMinor: 100n, currency: "EUR" });
    expect(first?.previousFence).toBe(0n);
    const second = await store.fenceNext("acc-fn", 6n, none, EXEC, 10_000);
    expect(second?.payout.payoutId).toBe("fn-3");
    // fn-2 and fn-3 are now claimed by the fence itself; fn-1 by another executor: nothing left.
    expect(await store.fenceNext("acc-fn", 7n, none, EXEC, 10_000)).toBeUndefined();
    const { rows } = await executorPool.query<{ payout_id: string; fence: string; state: string; claimed_by: string | null }>(
      "SELECT payout_id, fence::text, state, claimed_by FROM payouts WHERE payout_id LIKE 'fn-%' ORDER BY payout_id",
    );
    expect(rows).toEqual([
      { payout_id: "fn-1", fence: "0", state: "PENDING", claimed_by: "exec-other" },
      { payout_id: "fn-2", fence: "5", state: "PROCESSING", claimed_by: EXEC },
      { payout_id: "fn-3", fence: "6", state: "PROCESSING", claimed_by: EXEC },
      { payout_id: "fn-other", fence: "0", state: "PENDING", claimed_by: null },
    ]);
    expect(await announced()).toEqual(["acc-fn", "acc-fn", "acc-fn", "acc-fn-other"]);
  });

  it("the fence's rule per row: a payout fenced at or above the token, or closed, is not taken; a lapsed claim's is, and says its previous fence", async () => {
    for (const id of ["fr-ahead", "fr-paid", "fr-lapsed"]) await insert(payouts, id, "acc-fr");
    await owner.query("UPDATE payouts SET fence = 9, state = 'PROCESSING' WHERE payout_id = 'fr-ahead'");
    await owner.query("UPDATE payouts SET fence = 1, state = 'PAID', rail_reference = 'r' WHERE payout_id = 'fr-paid'");
    await owner.query(
      "UPDATE payouts SET fence = 3, state = 'PROCESSING', claimed_by = 'exec-gone', claimed_until = now() - interval '1 second' WHERE payout_id = 'fr-lapsed'",
    );
    const taken = await store.fenceNext("acc-fr", 4n, none, EXEC, 10_000);
    expect(taken?.payout.payoutId).toBe("fr-lapsed");
    expect(taken?.previousFence).toBe(3n);
    // fr-ahead (fence 9) is above token 4, fr-paid is closed, fr-lapsed now fenced at 4.
    expect(await store.fenceNext("acc-fr", 4n, none, EXEC, 10_000)).toBeUndefined();
    const { rows } = await owner.query<{ fence: string }>("SELECT fence::text FROM payouts WHERE payout_id = 'fr-ahead'");
    expect(rows[0]!.fence).toBe("9");
    await announced();
  });
});
