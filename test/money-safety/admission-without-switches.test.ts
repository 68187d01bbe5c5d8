/**
 * paydb's admission has no switches (migration 019, decision 064): rail_admit takes the intent and
 * nothing else, the one-live index covers every row, and the ledger itself refuses a row that says
 * a guard did not apply, whoever writes it (the owner here: no role can do more).
 *
 * Negative control: the harness's unguarded statement, installed into this throwaway paydb the
 * way a negative control installs it, is what lets such a row in; a freshly migrated paydb does
 * not have it.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { migrate } from "../../services/shared/db/migrate.js";
import { installUnguardedAdmission } from "../../tools/harness/unguarded-admission.js";
import { uniqueSuffix } from "../support/test-mesh.js";

const admin = inject("pgUrl");
const dbName = `paydb_switches${uniqueSuffix()}`;
const url = admin.replace(/\/[^/]*$/, `/${dbName}`);
let paydb: pg.Client;

beforeAll(async () => {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${dbName}`);
  await c.end();
  await migrate(url, "paydb");
  paydb = new pg.Client({ connectionString: url });
  await paydb.connect();
});

afterAll(async () => {
  await paydb?.end();
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await c.end();
});

/** An intent row as an unguarded statement would write it (a stale token: the mark did not advance). */
const plantedRow = (reference: string, markAdvanced: boolean, payoutBound: boolean) =>
  paydb.query(
    `INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced, payout_bound)
     VALUES ($1, $1, 'acc-switch', 3, 100, 'EUR', 'ben', 'FORWARDING', 'planted', $2, $3)`,
    [reference, markAdvanced, payoutBound],
  );

describe("the production schema", () => {
  it("rail_admit takes the intent's eight values and no guard switch, its group form the same as arrays; no other admission exists", async () => {
    const { rows } = await paydb.query<{ name: string; args: string }>(
      "SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname LIKE '%rail_admit%' ORDER BY p.proname",
    );
    expect(rows).toEqual([
      {
        name: "rail_admit",
        args: "p_reference text, p_payout_id text, p_account_id text, p_token bigint, p_amount_minor bigint, p_currency text, p_beneficiary text, p_replica_id text",
      },
      {
        name: "rail_admit_batch",
        args: "p_references text[], p_payout_ids text[], p_account_ids text[], p_tokens bigint[], p_amounts_minor bigint[], p_currencies text[], p_beneficiaries text[], p_replica_id text",
      },
    ]);
    // No function in the schema takes a guard switch.
    const switches = await paydb.query("SELECT proname FROM pg_proc WHERE pg_get_function_identity_arguments(oid) ~ '_guard boolean'");
    expect(switches.rows).toEqual([]);
  });

  it("the one-live index covers every row: no flag decides whether it applies", async () => {
    const { rows } = await paydb.query<{ def: string }>("SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'rail_submissions_one_live_per_payout'");
    expect(rows[0]!.def).toMatch(/WHERE \(\(state <> ALL \(ARRAY\['REJECTED'::text, 'NOT_FORWARDED'::text\]\)\) AND \(reopened_at IS NULL\)\)$/);
    const columns = await paydb.query(
      "SELECT column_name FROM information_schema.columns WHERE table_name = 'rail_submissions' AND column_name LIKE '%one_live%'",
    );
    expect(columns.rows).toEqual([]);
  });

  it.each([
    ["the mark did not advance", false, true],
    ["the payout binding did not apply", true, false],
  ])("the ledger refuses an intent recorded as if %s", async (_what, markAdvanced, payoutBound) => {
    await expect(plantedRow(`po-refused-${markAdvanced}-${payoutBound}`, markAdvanced, payoutBound)).rejects.toMatchObject({
      code: "23514",
      constraint: "rail_submissions_admitted_by_the_fence",
    });
  });
});

describe("negative control: the harness's unguarded statement", () => {
  it("is absent until a control installs it, and then such a row is taken", async () => {
    const before = await paydb.query("SELECT to_regproc('harness_rail_admit') AS f");
    expect(before.rows[0].f).toBeNull();
    await installUnguardedAdmission(url);
    await installUnguardedAdmission(url); // idempotent: a second proxy with a control starts fine
    const after = await paydb.query("SELECT to_regproc('harness_rail_admit')::text AS f");
    expect(after.rows[0].f).toBe("harness_rail_admit");
    await plantedRow("po-taken", false, true);
    const { rows } = await paydb.query("SELECT mark_advanced FROM rail_submissions WHERE payout_id = 'po-taken'");
    expect(rows).toEqual([{ mark_advanced: false }]);
  });
});
