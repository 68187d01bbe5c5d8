/**
 * Migration 021: paydb announces a payout that becomes payable (decision 069), and only then.
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

describe("migration 021: payable payouts are announced", () => {
  it("announces creation once per transaction, on commit; not claims, fences, later retries or outcomes; a claim given back at once and a reopening are", async () => {
    // Three payouts in one transaction: one notification, with an empty payload, after COMMIT.
    const tx = await payouts.connect();
    try {
      await tx.query("BEGIN");
      for (const id of ["po-a", "po-b", "po-c"]) {
        await tx.query(
          "INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, idempotency_key) VALUES ($1, 'client-1', $2, 100, 'EUR', 'ben', $1)",
          [id, `acc-${id}`],
        );
      }
      expect(await announced()).toEqual([]);
      await tx.query("COMMIT");
    } finally {
      tx.release();
    }
    expect(await announced()).toEqual([""]);

    // Claimed: not payable by anyone else now.
    expect(await store.claim(EXEC, 3, 10_000)).toHaveLength(3);
    expect(await announced()).toEqual([]);

    // Deferred to later: payable then, but no write happens then; the poll's to find.
    await store.deferClaim("po-a", EXEC, 0n, 5000);
    expect(await announced()).toEqual([]);

    // Given back at once (an executor draining): payable now.
    await store.deferClaim("po-b", EXEC, 0n, 0);
    expect(await announced()).toEqual([""]);

    // Fenced, then closed: never announced.
    expect(await store.fence("po-c", 1n, new Uint8Array(), EXEC, 10_000)).toEqual({ previousFence: 0n });
    expect(await store.recordOutcome("po-c", 1n, { state: "FAILED", failureReason: "RAIL_REJECTED" })).toBeDefined();
    expect(await announced()).toEqual([]);

    // Reopened by the owner (what reopen_payout does to the row): payable again.
    await owner.query("UPDATE payouts SET state = 'PENDING', failure_reason = NULL, claimed_by = NULL, claimed_until = NULL WHERE payout_id = 'po-c'");
    expect(await announced()).toEqual([""]);
  });
});
