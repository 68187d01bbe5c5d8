/**
 * Migrations 015 and 016 on a paydb that already has data: payouts keep the keys still
 * remembered, and today's daily-amount usage carries over per client (never reset, never
 * merged across clients), replacing the shared per-account counters of 010.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it, inject } from "vitest";
import { migrate } from "../../services/shared/db/migrate.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { uniqueSuffix } from "../support/test-mesh.js";

const admin = inject("pgUrl");
const name = `migkeys${uniqueSuffix()}`;
const dir = mkdtempSync(join(tmpdir(), "railfence-mig-"));

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await c.end();
});

describe("migrations 015 (payout keeps its key) and 016 (limits per client) on existing data", () => {
  it("backfills the remembered keys and splits today's usage per client", async () => {
    const c0 = new pg.Client({ connectionString: admin });
    await c0.connect();
    await c0.query(`CREATE DATABASE ${name}`);
    await c0.end();
    const url = admin.replace(/\/[^/]*$/, `/${name}`);

    // The schema as it was before 015: the same files, so the full run later skips them.
    const all = join(projectRoot(), "migrations", "paydb");
    for (const f of readdirSync(all).filter((f) => /^\d{3}_/.test(f) && f < "015")) cpSync(join(all, f), join(dir, f));
    await migrate(url, "paydb", dir);

    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary) VALUES
           ('po-kept', 'client-1', 'acc-m', 300, 'EUR', 'b'),
           ('po-purged', 'client-2', 'acc-m', 500, 'EUR', 'b'),
           ('po-old', 'client-1', 'acc-m', 999, 'EUR', 'b')`,
      );
      await db.query("UPDATE payouts SET created_at = now() - interval '2 days' WHERE payout_id = 'po-old'");
      await db.query(
        `INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, state, response, payout_id, expires_at)
         VALUES ('client-1', 'key-kept', '\\x00', 'DONE', '\\x00', 'po-kept', now() + interval '1 day')`,
      );
      // 010's shared counter for today: 800 across both clients.
      await db.query(
        `INSERT INTO payout_limit_usage (scope, subject, window_start, used)
         VALUES ('account_daily_amount', 'acc-m/EUR', date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', 800)`,
      );

      expect(await migrate(url, "paydb")).toEqual(expect.arrayContaining(["015", "016"]));

      const keys = await db.query("SELECT payout_id, idempotency_key FROM payouts ORDER BY payout_id");
      expect(keys.rows).toEqual([
        { payout_id: "po-kept", idempotency_key: "key-kept" },
        { payout_id: "po-old", idempotency_key: null },
        { payout_id: "po-purged", idempotency_key: null },
      ]);
      const usage = await db.query("SELECT subject, used::text FROM payout_limit_usage WHERE scope = 'account_daily_amount' ORDER BY subject");
      expect(usage.rows).toEqual([
        { subject: "client-1/acc-m/EUR", used: "300" },
        { subject: "client-2/acc-m/EUR", used: "500" },
      ]);
      // The carried-over usage is what the new function counts against.
      const consumed = await db.query("SELECT outcome, used::text FROM consume_payout_limits('client-2', 0, 60000, 'acc-m', 'EUR', 600, 1000)");
      expect(consumed.rows[0]).toEqual({ outcome: "ACCOUNT_DAILY_AMOUNT", used: "500" });
    } finally {
      await db.end();
    }
  });
});
