/**
 * The checker can fail: each invariant is violated on purpose in real databases (written the way
 * a broken proxy or executor would write them), and the checker must name it. A clean history
 * must pass.
 */
import pg from "pg";
import { afterAll, beforeEach, describe, expect, it, inject } from "vitest";
import { checkInvariants } from "../../services/harness/invariants.js";
import { migrate } from "../../services/shared/migrate.js";
import { uniqueSuffix } from "../support/test-mesh.js";

const admin = inject("pgUrl");
const created: string[] = [];
let paydb: pg.Client;
let raildb: pg.Client;
let urls: { paydb: string; raildb: string };

async function createDb(kind: "paydb" | "raildb"): Promise<string> {
  const name = `${kind}chk${uniqueSuffix()}`;
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  created.push(name);
  const url = admin.replace(/\/[^/]*$/, `/${name}`);
  await migrate(url, kind);
  return url;
}

beforeEach(async () => {
  await paydb?.end();
  await raildb?.end();
  urls = { paydb: await createDb("paydb"), raildb: await createDb("raildb") };
  paydb = new pg.Client({ connectionString: urls.paydb });
  raildb = new pg.Client({ connectionString: urls.raildb });
  await paydb.connect();
  await raildb.connect();
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  for (const name of created) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await c.end();
});

/** What a correct proxy does: one statement advancing the mark and recording the intent. */
async function admit(account: string, payout: string, token: number, state = "ACCEPTED") {
  await paydb.query(
    `WITH advanced AS (INSERT INTO rail_high_water AS h (account_id, mark) VALUES ($1, $2)
       ON CONFLICT (account_id) DO UPDATE SET mark = EXCLUDED.mark WHERE h.mark < EXCLUDED.mark RETURNING mark)
     INSERT INTO rail_submissions (payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced)
     SELECT $3, $1, $2, 100, 'EUR', 'b', $4, 'r1', true FROM advanced`,
    [account, token, payout, state],
  );
}
async function railPays(account: string, payout: string, status = "ACCEPTED") {
  await raildb.query(
    "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES (md5(random()::text), $1, $2, 'b', 100, 'EUR', $3)",
    [payout, account, status],
  );
}
async function payout(id: string, account: string, state: string) {
  await paydb.query("INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state) VALUES ($1, 'c', $2, 100, 'EUR', 'b', $3)", [id, account, state]);
}
const invariantsOf = async (quiescent = false) => [...new Set((await checkInvariants(urls.paydb, urls.raildb, { quiescent })).violations.map((v) => v.invariant))].sort();

describe("invariant checker", () => {
  it("passes a clean history", async () => {
    await payout("p1", "a1", "PAID");
    await admit("a1", "p1", 5);
    await railPays("a1", "p1");
    await payout("p2", "a1", "FAILED");
    await admit("a1", "p2", 7, "REJECTED");
    await railPays("a1", "p2", "REJECTED");
    const r = await checkInvariants(urls.paydb, urls.raildb, { quiescent: true });
    expect(r.violations).toEqual([]);
    expect(r.counts).toMatchObject({ railAccepted: 1, intents: 2, payoutsPaid: 1, payoutsFailed: 1, markAdvances: 2 });
  });

  it("finds a double payment on the rail (INV-02)", async () => {
    await payout("p1", "a1", "PAID");
    await admit("a1", "p1", 5);
    await railPays("a1", "p1");
    await railPays("a1", "p1");
    expect(await invariantsOf()).toEqual(["INV-02"]);
  });

  it("finds a payout paid twice under two attempt references (a stale writer's fresh reference)", async () => {
    await payout("p1", "a1", "PAID");
    await admit("a1", "p1:t5", 5);
    await railPays("a1", "p1:t5");
    await admit("a1", "p1:t7", 7);
    await railPays("a1", "p1:t7");
    expect(await invariantsOf()).toEqual(["INV-02"]);
  });

  it("finds a rail payment with no intent (someone went around the proxy)", async () => {
    await railPays("a1", "ghost");
    expect(await invariantsOf()).toContain("INTENT_FIRST");
  });

  it("finds an admission that did not advance the mark (fencing disabled)", async () => {
    await admit("a1", "p1", 90);
    await railPays("a1", "p1");
    await paydb.query(
      "INSERT INTO rail_submissions (payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced) VALUES ('p2', 'a1', 41, 100, 'EUR', 'b', 'ACCEPTED', 'r1', false)",
    );
    await railPays("a1", "p2");
    expect(await invariantsOf()).toEqual(["FENCE_ADVANCED"]);
  });

  it("finds a mark that went backwards in the history", async () => {
    await admit("a1", "p1", 9);
    await railPays("a1", "p1");
    await paydb.query("INSERT INTO rail_high_water_log (account_id, old_mark, new_mark) VALUES ('a1', 9, 4)");
    expect(await invariantsOf()).toContain("MARK_MONOTONIC");
  });

  it("finds outcomes and resolutions that contradict the rail", async () => {
    await admit("a1", "p1", 1, "ACCEPTED"); // ACCEPTED, rail has nothing
    await admit("a1", "p2", 2, "REJECTED");
    await railPays("a1", "p2"); // REJECTED but paid
    expect(await invariantsOf()).toEqual(["OUTCOME_KNOWN"]);
  });

  it("finds payouts that disagree with the rail, and open payouts once quiescent", async () => {
    await payout("p1", "a1", "FAILED");
    await admit("a1", "p1", 1);
    await railPays("a1", "p1");
    await payout("p2", "a1", "PENDING");
    expect(await invariantsOf(false)).toEqual(["PAYOUT_CONSISTENT"]);
    const r = await checkInvariants(urls.paydb, urls.raildb, { quiescent: true });
    expect(r.violations.filter((v) => v.invariant === "PAYOUT_CONSISTENT")).toHaveLength(2);
  });
});
