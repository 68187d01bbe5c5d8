/**
 * What a service role can write into a payout, and what the daily audit then sees. Executors are
 * untrusted (INV-07) and so is a compromised payouts pod; each write below was allowed before
 * migrations 012-013, logged in as the real service roles against a real paydb:
 *
 * - parking: an executor fences a payout with the largest token there is (every honest executor
 *   is then fenced out for ever), claims one until 'infinity', or sets one UNKNOWN with nothing to
 *   reconcile;
 * - the payouts role inserts a payout already PAID, fenced, or dated in the past;
 * - an old payout rewritten today (UNKNOWN -> FAILED although the rail paid it, PENDING -> PAID
 *   with a forged reference) passed the daily audit (`--since 25h` windowed on created_at).
 *
 * Each guard has its negative control: the guard removed alone in this test's throwaway paydb,
 * and the audit, or the executor's own check, catching what then gets through.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import { runAudit, type AuditResult } from "../../services/cli/audit/audit.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, poolFor, startExecutor, startLock, waitForLog } from "../executor/support.js";

let mesh: Mesh;
let paydb: pg.Pool;
let raildb: pg.Pool;
let executorDb: pg.Pool;
let payoutsDb: pg.Pool;
let auditorDb: pg.Pool;
let lock: ServiceProcess;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
  executorDb = poolFor(mesh.roleUrl("paydb", "executor"));
  payoutsDb = poolFor(mesh.roleUrl("paydb", "payouts"));
  auditorDb = poolFor(mesh.roleUrl("paydb", "auditor"));
  lock = await startLock(mesh);
});

afterAll(async () => {
  for (const p of started) await p.stop();
  await lock?.stop();
  for (const pool of [executorDb, payoutsDb, auditorDb, paydb, raildb]) await pool?.end();
  await mesh?.stop();
});

const sqlstate = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: { code?: string }) => e.code ?? "error",
  );

/** Runs `fn` with one of paydb's triggers disabled (a guard removed alone, as the owner). */
async function withoutTrigger<T>(trigger: string, fn: () => Promise<T>): Promise<T> {
  await paydb.query(`ALTER TABLE payouts DISABLE TRIGGER ${trigger}`);
  try {
    return await fn();
  } finally {
    await paydb.query(`ALTER TABLE payouts ENABLE TRIGGER ${trigger}`);
  }
}

/** The audit as production runs it: the auditor's login, the rail's own ledger as the statement. */
function audit(opts: { since?: Date; maxOpenAgeMs?: number } = {}): Promise<AuditResult> {
  return runAudit(auditorDb, ledgerStatement(raildb), opts);
}

const named = (r: AuditResult, id: string) => [...new Set(r.violations.filter((v) => JSON.stringify(v.row).includes(id)).map((v) => v.invariant))].sort();

describe("an executor's role cannot park a payout", () => {
  it("a claim until 'infinity' is refused (claims are at most 15 minutes); without the guard, the audit names it", async () => {
    await insertPayouts(paydb, [{ payoutId: "po-park-claim", accountId: "acc-park-claim" }]);
    const park = "UPDATE payouts SET claimed_by = 'rogue', claimed_until = 'infinity' WHERE payout_id = 'po-park-claim'";
    expect(await sqlstate(executorDb.query(park))).toBe("23514");
    expect((await paydb.query("SELECT claimed_until FROM payouts WHERE payout_id = 'po-park-claim'")).rows[0].claimed_until).toBeNull();
    // Negative control: the bound removed, the claim lands, and the audit names it.
    await withoutTrigger("payouts_write_bounded", () => executorDb.query(park));
    expect(named(await audit(), "po-park-claim")).toContain("CLAIM_BOUNDED");
  });

  it("PENDING -> UNKNOWN with no ambiguous submission is refused; without the guard, the audit names it", async () => {
    await insertPayouts(paydb, [{ payoutId: "po-park-unknown", accountId: "acc-park-unknown" }]);
    const park = "UPDATE payouts SET state = 'UNKNOWN' WHERE payout_id = 'po-park-unknown'";
    expect(await sqlstate(executorDb.query(park))).toBe("23000");
    expect((await paydb.query("SELECT state FROM payouts WHERE payout_id = 'po-park-unknown'")).rows[0].state).toBe("PENDING");
    await withoutTrigger("payouts_write_bounded", () => executorDb.query(park));
    expect(named(await audit(), "po-park-unknown")).toContain("UNKNOWN_UNLISTED");
  });

  it("a payout fenced above anything the lock issued is flagged FENCE_AHEAD_OF_LOCK by the next executor, not fenced out for ever", async () => {
    await insertPayouts(paydb, [{ payoutId: "po-park-fence", accountId: "acc-park-fence" }]);
    // Fences only rise, so the role may raise one: to the largest token there is.
    await executorDb.query("UPDATE payouts SET fence = 9223372036854775807 WHERE payout_id = 'po-park-fence'");
    const e = await startExecutor(mesh, lock, "exec-park-fence", { LOG_LEVEL: "info" });
    started.push(e);
    const attempt = await waitForLog(e, (l) => l.event === "payout_attempt" && l.payout_id === "po-park-fence", "the attempt").finally(() => e.stop());
    expect(attempt).toMatchObject({ outcome: "NEEDS_ATTENTION", why: "FENCE_AHEAD_OF_LOCK" });
    const { rows } = await paydb.query("SELECT state, attention_reason FROM payouts WHERE payout_id = 'po-park-fence'");
    expect(rows[0]).toEqual({ state: "NEEDS_ATTENTION", attention_reason: "FENCE_AHEAD_OF_LOCK" });
  });

  it("negative control: the same forged fence with no executor's check (none runs on it) parks it, and the audit's open-age bound names it", async () => {
    await insertPayouts(paydb, [{ payoutId: "po-park-old", accountId: "acc-park-old" }]);
    await executorDb.query("UPDATE payouts SET fence = 9223372036854775807 WHERE payout_id = 'po-park-old'");
    await paydb.query("UPDATE payouts SET created_at = now() - interval '2 days' WHERE payout_id = 'po-park-old'");
    expect((await paydb.query("SELECT state FROM payouts WHERE payout_id = 'po-park-old'")).rows[0].state).toBe("PENDING");
    expect(named(await audit({ maxOpenAgeMs: 24 * 3_600_000 }), "po-park-old")).toContain("PAYOUT_AGE");
  });
});

describe("the payouts role inserts only what a client asked for", () => {
  const insert = (cols: string, values: string) =>
    payoutsDb.query(`INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary${cols}) VALUES (${values})`);

  it("a payout already PAID, fenced, or dated in the past is refused, and nothing is written", async () => {
    expect(await sqlstate(insert(", state, rail_reference", "'po-ins-paid', 'c', 'acc-ins', 100, 'EUR', 'b', 'PAID', 'rr_forged'"))).toBe("42501");
    expect(await sqlstate(insert(", fence", "'po-ins-fence', 'c', 'acc-ins', 100, 'EUR', 'b', 9223372036854775807"))).toBe("42501");
    expect(await sqlstate(insert(", created_at", "'po-ins-old', 'c', 'acc-ins', 100, 'EUR', 'b', now() - interval '3 days'"))).toBe("42501");
    const { rows } = await paydb.query("SELECT count(*)::int AS n FROM payouts WHERE payout_id LIKE 'po-ins-%'");
    expect(rows[0].n).toBe(0);
    // A payout without the key that created it could not be looked up once the key is purged.
    expect(await sqlstate(insert("", "'po-ins-nokey', 'c', 'acc-ins', 100, 'EUR', 'b'"))).toBe("23502");
    expect((await paydb.query("SELECT count(*)::int AS n FROM payouts WHERE payout_id LIKE 'po-ins-%'")).rows[0].n).toBe(0);
    // What a client asks for is accepted: PENDING, fence 0, the server's time, its key.
    await insert(", idempotency_key", "'po-ins-ok', 'c', 'acc-ins', 100, 'EUR', 'b', 'key-1'");
    // ...and the key a payout was created with never changes (no service role may write it).
    expect(await sqlstate(payoutsDb.query("UPDATE payouts SET idempotency_key = 'key-2' WHERE payout_id = 'po-ins-ok'"))).toBe("42501");
    const { rows: ok } = await paydb.query(
      "SELECT state, fence::text, created_at > now() - interval '1 minute' AS fresh FROM payouts WHERE payout_id = 'po-ins-ok'",
    );
    expect(ok[0]).toEqual({ state: "PENDING", fence: "0", fresh: true });
  });
});

describe("the daily audit sees every change, not only new payouts", () => {
  /** A payout and its history as they stood two days ago (history backdated by the owner). */
  async function twoDaysOld(payoutId: string, state: string, extra: { railPaid?: string } = {}) {
    await paydb.query("ALTER TABLE payouts DISABLE TRIGGER payouts_history");
    try {
      await paydb.query(
        `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence, created_at, updated_at)
         VALUES ($1, 'old', $2, 900, 'EUR', 'ben-old', $3, 5, now() - interval '2 days', now() - interval '2 days')`,
        [payoutId, `acc-${payoutId}`, state],
      );
    } finally {
      await paydb.query("ALTER TABLE payouts ENABLE TRIGGER payouts_history");
    }
    await paydb.query("ALTER TABLE payout_history DISABLE TRIGGER payout_history_append_only");
    try {
      await paydb.query(
        "INSERT INTO payout_history (payout_id, new_state, new_fence, changed_by, changed_at) VALUES ($1, $2, 5, 'old', now() - interval '2 days')",
        [payoutId, state],
      );
    } finally {
      await paydb.query("ALTER TABLE payout_history ENABLE TRIGGER payout_history_append_only");
    }
    if (extra.railPaid) {
      // The rail booked it two days ago (the submission's answer was lost: TIMEOUT).
      await paydb.query(
        `INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced, created_at)
         VALUES ($1, $1, $2, 5, 900, 'EUR', 'ben-old', 'FORWARDING', 'old', true, now() - interval '2 days')`,
        [payoutId, `acc-${payoutId}`],
      );
      await paydb.query("UPDATE rail_submissions SET state = 'TIMEOUT' WHERE payout_id = $1", [payoutId]);
      await raildb.query(
        `INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status, booked_at)
         VALUES ($1, $2, $3, 'ben-old', 900, 'EUR', 'ACCEPTED', now() - interval '2 days')`,
        [extra.railPaid, payoutId, `acc-${payoutId}`],
      );
    }
  }

  it("an old payout the rail paid, set FAILED today, and an old unpaid one set PAID with a forged reference: both named by --since 25h", async () => {
    const paid = `po-old-paid-${randomBytes(3).toString("hex")}`;
    const unpaid = `po-old-unpaid-${randomBytes(3).toString("hex")}`;
    await twoDaysOld(paid, "UNKNOWN", { railPaid: `rr_old_${randomBytes(6).toString("hex")}` });
    await twoDaysOld(unpaid, "PENDING");
    const since = new Date(Date.now() - 25 * 3_600_000);
    // (UNKNOWN for two days is itself named, by PAYOUT_AGE: open longer than a day.)
    expect(named(await audit({ since }), paid)).not.toContain("PAID_DESPITE_NOT_PAID");
    // As the executor's role, today (both transitions are forward moves 009 allows).
    await executorDb.query("UPDATE payouts SET state = 'FAILED', failure_reason = 'RESOLVED_NOT_PAID' WHERE payout_id = $1", [paid]);
    await executorDb.query("UPDATE payouts SET state = 'PAID', rail_reference = 'rr_forged' WHERE payout_id = $1", [unpaid]);
    const daily = await audit({ since });
    expect(named(daily, paid)).toContain("PAID_DESPITE_NOT_PAID");
    expect(named(daily, unpaid)).toContain("PAID_REFERENCE");
    // The history says who: the executor's login, today.
    const { rows } = await auditorDb.query("SELECT new_state, changed_by FROM payout_history WHERE payout_id = $1 ORDER BY id DESC LIMIT 1", [unpaid]);
    expect(rows[0]).toMatchObject({ new_state: "PAID" });
    expect(rows[0].changed_by).not.toBe("old");
  });

  it("negative control: without the history (its trigger removed alone) the same rewrites pass the daily audit", async () => {
    const paid = `po-old-paid-nc-${randomBytes(3).toString("hex")}`;
    const unpaid = `po-old-unpaid-nc-${randomBytes(3).toString("hex")}`;
    await twoDaysOld(paid, "UNKNOWN", { railPaid: `rr_old_${randomBytes(6).toString("hex")}` });
    await twoDaysOld(unpaid, "PENDING");
    await withoutTrigger("payouts_history", async () => {
      await executorDb.query("UPDATE payouts SET state = 'FAILED' WHERE payout_id = $1", [paid]);
      await executorDb.query("UPDATE payouts SET state = 'PAID', rail_reference = 'rr_forged' WHERE payout_id = $1", [unpaid]);
    });
    const daily = await audit({ since: new Date(Date.now() - 25 * 3_600_000) });
    // The forged PAID is judged only by the window: without the history it is outside it. (The
    // FAILED-but-paid one depends on how far back the statement is read, which other payouts
    // changed today also decide, so it is not asserted here.)
    expect(named(daily, unpaid)).toEqual([]);
    // A full check still finds both (the history only decides what a window sees).
    const full = await audit();
    expect(named(full, paid)).toContain("PAID_DESPITE_NOT_PAID");
    expect(named(full, unpaid)).toContain("PAID_REFERENCE");
  });

  it("payout_history is append-only and no service role writes it", async () => {
    const { rows } = await paydb.query("SELECT id FROM payout_history ORDER BY id LIMIT 1");
    expect(await sqlstate(paydb.query("DELETE FROM payout_history WHERE id = $1", [rows[0].id]))).toBe("23000");
    expect(await sqlstate(paydb.query("UPDATE payout_history SET new_state = 'PAID' WHERE id = $1", [rows[0].id]))).toBe("23000");
    for (const pool of [executorDb, payoutsDb, auditorDb]) {
      expect(await sqlstate(pool.query("INSERT INTO payout_history (payout_id, new_state, new_fence, changed_by) VALUES ('x', 'PAID', 0, 'me')"))).toBe(
        "42501",
      );
      expect(await sqlstate(pool.query("DELETE FROM payout_history"))).toBe("42501");
    }
  });
});
