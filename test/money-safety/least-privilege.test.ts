/**
 * Least privilege in paydb and lockdb: one owner role runs migrations; rail-proxy, executor,
 * payouts, reconciler and lock each log in with a role of their own that can run only the
 * statements that service uses. Logged in as each role, every statement that could defeat a
 * guard (delete an intent so a payout can be admitted again, forge a mark, disable a trigger,
 * truncate, alter) is refused by PostgreSQL itself. And rail_submissions is protected like the
 * marks: no delete or truncate, immutable keys, states only along the allowed transitions —
 * even for the owner.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { SERVICE_ROLES, type ServiceRole } from "../../services/shared/db/db-roles.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, poolFor } from "../executor/support.js";

let mesh: Mesh;
let owner: pg.Pool;

beforeAll(async () => {
  mesh = testMesh({ proxies: 0 });
  await mesh.startDatabases();
  owner = poolFor(mesh.dbUrl("paydb"));
  await insertPayouts(owner, [{ payoutId: "po-priv-1", accountId: "acc-priv", state: "PROCESSING" }]);
  await owner.query("INSERT INTO rail_high_water (account_id, mark) VALUES ('acc-priv', 5)");
  await owner.query(
    `INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced)
     VALUES ('po-priv-1', 'po-priv-1', 'acc-priv', 5, 1000, 'EUR', 'ben-acc-priv', 'FORWARDING', 'test', true)`,
  );
});

afterAll(async () => {
  await owner?.end();
  await mesh?.stop();
});

/** Runs sql logged in as role inside a transaction that is always rolled back; returns the SQLSTATE or "ok". */
async function attempt(role: ServiceRole, sql: string): Promise<string> {
  const db = SERVICE_ROLES[role].database;
  const client = new pg.Client({ connectionString: mesh.roleUrl(db, role) });
  await client.connect();
  try {
    await client.query("BEGIN");
    await client.query(sql);
    return "ok";
  } catch (err) {
    return (err as { code?: string }).code ?? "error";
  } finally {
    await client.query("ROLLBACK").catch(() => {});
    await client.end();
  }
}

const INSUFFICIENT_PRIVILEGE = "42501";

const forbidden: Array<[ServiceRole, string]> = [
  // The executor is untrusted (INV-07): it cannot touch the proxy's guards at all.
  ["executor", "DELETE FROM rail_submissions"],
  [
    "executor",
    "INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced) VALUES ('x', 'x', 'acc-priv', 9, 1, 'EUR', 'b', 'FORWARDING', 'r', true)",
  ],
  ["executor", "UPDATE rail_submissions SET state = 'REJECTED'"],
  ["executor", "UPDATE rail_high_water SET mark = 9223372036854775807"],
  ["executor", "INSERT INTO rail_high_water (account_id, mark) VALUES ('acc-new', 1)"],
  ["executor", "ALTER TABLE rail_high_water DISABLE TRIGGER ALL"],
  ["executor", "DELETE FROM payouts"],
  ["executor", "TRUNCATE payouts"],
  ["executor", "UPDATE payouts SET amount_minor = 1"],
  ["executor", "UPDATE payouts SET beneficiary = 'ben-attacker'"],
  ["executor", "INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary) VALUES ('po-x', 'c', 'a', 1, 'EUR', 'b')"],
  ["executor", "SELECT * FROM idempotency_keys"],
  ["executor", "INSERT INTO rail_high_water_log (account_id, new_mark) VALUES ('acc-priv', 1)"],
  ["executor", "CREATE TABLE evil (x int)"],
  // rail-proxy owns the guards but can only advance and record, never remove.
  ["rail-proxy", "DELETE FROM rail_submissions"],
  ["rail-proxy", "DELETE FROM rail_high_water"],
  ["rail-proxy", "TRUNCATE rail_submissions"],
  ["rail-proxy", "ALTER TABLE rail_submissions DISABLE TRIGGER ALL"],
  ["rail-proxy", "ALTER TABLE rail_high_water DISABLE TRIGGER ALL"],
  ["rail-proxy", "DROP TABLE rail_high_water"],
  ["rail-proxy", "INSERT INTO rail_high_water_log (account_id, new_mark) VALUES ('acc-priv', 1)"],
  ["rail-proxy", "UPDATE payouts SET amount_minor = 1"],
  ["rail-proxy", "UPDATE payouts SET fence = 99"],
  ["rail-proxy", "INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary) VALUES ('po-x', 'c', 'a', 1, 'EUR', 'b')"],
  ["rail-proxy", "DELETE FROM idempotency_keys"],
  // payouts creates payouts and keeps idempotency answers; it never pays.
  ["payouts", "UPDATE rail_high_water SET mark = mark + 1"],
  [
    "payouts",
    "INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced) VALUES ('x', 'x', 'acc-priv', 9, 1, 'EUR', 'b', 'FORWARDING', 'r', true)",
  ],
  ["payouts", "UPDATE payouts SET fence = 99"],
  ["payouts", "UPDATE payouts SET state = 'PAID'"],
  ["payouts", "DELETE FROM payouts"],
  ["payouts", "TRUNCATE idempotency_keys"],
  // The reconciler writes no payout (decision 066): a resolution closes its payout in rail-proxy's
  // statement; the ledger it changes only through rail-proxy.
  ["reconciler", "UPDATE rail_submissions SET state = 'RESOLVED_NOT_PAID'"],
  ["reconciler", "UPDATE rail_high_water SET mark = mark + 1"],
  ["reconciler", "UPDATE payouts SET amount_minor = 1"],
  ["reconciler", "UPDATE payouts SET fence = 99"],
  ["reconciler", "UPDATE payouts SET state = 'FAILED', failure_reason = 'x' WHERE payout_id = 'po-priv-1'"],
  ["reconciler", "UPDATE payouts SET state = 'PAID', rail_reference = 'rr_x' WHERE payout_id = 'po-priv-1'"],
  ["reconciler", "DELETE FROM payouts"],
  // The lock service's tokens only grow, and its rows are never removed.
  ["lock", "DELETE FROM locks"],
  ["lock", "TRUNCATE locks"],
  ["lock", "ALTER TABLE locks DISABLE TRIGGER ALL"],
  ["lock", "DELETE FROM lock_token_floor"],
];

describe("each service's database role", () => {
  it.each(forbidden)("%s cannot run: %s", async (role, sql) => {
    // 42501 covers both "permission denied" and "must be owner".
    expect(await attempt(role, sql)).toBe(INSUFFICIENT_PRIVILEGE);
  });

  it.each([
    ["executor", "UPDATE payouts SET fence = fence + 1, state = 'PROCESSING' WHERE payout_id = 'po-priv-1'"],
    ["rail-proxy", "UPDATE rail_high_water SET mark = mark + 1 WHERE account_id = 'acc-priv'"],
    ["rail-proxy", "UPDATE rail_submissions SET state = 'ACCEPTED', rail_reference = 'rr_x' WHERE payout_id = 'po-priv-1'"],
    ["rail-proxy", "SELECT amount_minor, beneficiary, fence FROM payouts"],
    [
      "payouts",
      "INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, idempotency_key) VALUES ('po-new', 'c', 'a', 1, 'EUR', 'b', 'k-1')",
    ],
    ["reconciler", "SELECT state, fence, rail_reference FROM payouts"],
    ["reconciler", "SELECT payout_paid_without_intent('po-priv-absent', 'rr_x')"],
    [
      "rail-proxy",
      "UPDATE payouts SET rail_reference = rail_reference, failure_reason = failure_reason, claimed_by = claimed_by WHERE payout_id = 'po-priv-absent'",
    ],
    ["lock", "SELECT token FROM locks"],
  ] as Array<[ServiceRole, string]>)("%s can still run what it uses: %s", async (role, sql) => {
    expect(await attempt(role, sql)).toBe("ok");
  });

  it("every service role exists, can log in, and is none of: superuser, owner, CREATEROLE, BYPASSRLS", async () => {
    for (const [role, spec] of Object.entries(SERVICE_ROLES)) {
      const { rows } = await owner.query<{ rolsuper: boolean; rolcreaterole: boolean; rolbypassrls: boolean; rolcanlogin: boolean }>(
        "SELECT rolsuper, rolcreaterole, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = $1",
        [spec.name],
      );
      expect(rows[0], role).toEqual({ rolsuper: false, rolcreaterole: false, rolbypassrls: false, rolcanlogin: true });
    }
  });
});

describe("the payout row's own guard (a compromised executor cannot reopen or rewrite a payout)", () => {
  beforeAll(async () => {
    await insertPayouts(owner, [{ payoutId: "po-priv-done", accountId: "acc-priv-done", state: "PROCESSING" }]);
    await owner.query("UPDATE payouts SET fence = 7 WHERE payout_id = 'po-priv-done'");
    await owner.query("UPDATE payouts SET state = 'FAILED' WHERE payout_id = 'po-priv-done'");
  });

  it.each([
    ["reopens a FAILED payout under its own token", "UPDATE payouts SET state = 'PROCESSING', fence = 99 WHERE payout_id = 'po-priv-done'"],
    ["turns a FAILED payout PAID", "UPDATE payouts SET state = 'PAID' WHERE payout_id = 'po-priv-done'"],
    ["lowers a fence", "UPDATE payouts SET fence = 1 WHERE payout_id = 'po-priv-done'"],
  ])("the executor's role cannot: %s", async (_what, sql) => {
    expect(await attempt("executor", sql)).toBe("23000");
  });

  it("but it can still move a payout forward (negative control)", async () => {
    expect(await attempt("executor", "UPDATE payouts SET state = 'NEEDS_ATTENTION', attention_reason = 'X' WHERE payout_id = 'po-priv-done'")).toBe("ok");
  });
});

describe("rail_submissions is protected like the marks, even from the owner", () => {
  async function asOwner(sql: string): Promise<string> {
    const client = await owner.connect();
    try {
      await client.query("BEGIN");
      await client.query(sql);
      return "ok";
    } catch (err) {
      return (err as { code?: string }).code ?? "error";
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      client.release();
    }
  }

  it.each([
    ["a delete", "DELETE FROM rail_submissions WHERE payout_id = 'po-priv-1'"],
    ["a truncate", "TRUNCATE rail_submissions"],
    ["a changed reference", "UPDATE rail_submissions SET payout_id = 'po-other' WHERE payout_id = 'po-priv-1'"],
    ["a changed payout", "UPDATE rail_submissions SET bound_payout_id = 'po-other' WHERE payout_id = 'po-priv-1'"],
    ["a changed amount", "UPDATE rail_submissions SET amount_minor = 1 WHERE payout_id = 'po-priv-1'"],
    ["a changed token", "UPDATE rail_submissions SET fencing_token = 99 WHERE payout_id = 'po-priv-1'"],
    [
      "ACCEPTED -> FORWARDING",
      "UPDATE rail_submissions SET state = 'ACCEPTED' WHERE payout_id = 'po-priv-1'; UPDATE rail_submissions SET state = 'FORWARDING' WHERE payout_id = 'po-priv-1'",
    ],
    [
      "ACCEPTED -> REJECTED",
      "UPDATE rail_submissions SET state = 'ACCEPTED' WHERE payout_id = 'po-priv-1'; UPDATE rail_submissions SET state = 'REJECTED' WHERE payout_id = 'po-priv-1'",
    ],
    [
      "an intent inserted in a state other than FORWARDING",
      "INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced) VALUES ('x', 'x', 'acc-priv', 9, 1, 'EUR', 'b', 'ACCEPTED', 'r', true)",
    ],
  ])("refuses %s", async (_what, sql) => {
    expect(await asOwner(sql)).toBe("23000");
  });
});
