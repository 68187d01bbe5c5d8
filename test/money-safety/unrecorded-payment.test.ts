/**
 * A rail payment paydb has no intent for, for a payout paydb knows (decision 036). paydb lost what
 * it had acknowledged (a failover to a standby that had not received it, a restore to an earlier
 * point): the intent is gone, and with it the payout's PAID write, so the payout is PROCESSING
 * again, unclaimed. The rail paid it.
 *
 * - The reconciler's fourth pass finds the payment, takes the payout as PAID from it (an executor
 *   that claims it next has nothing to do), and flags it loudly; nothing is paid again.
 * - A payment that names the payout but pays something else is flagged and never taken as paid.
 * - Negative control (UNRECORDED_PAYMENT_WATCH_MS=0): nothing notices, the next executor pays
 *   the payout a second time, and the audit names it.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import { runAudit } from "../../services/cli/audit/audit.js";
import { eventually } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, payoutStates, poolFor, railPaymentCounts, startExecutor, startLock } from "../executor/support.js";
import { quietFor } from "../support/time.js";

let mesh: Mesh;
let lock: ServiceProcess;
let paydb: pg.Pool;
let raildb: pg.Pool;
let auditorDb: pg.Pool;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
  lock = await startLock(mesh);
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
  auditorDb = poolFor(mesh.roleUrl("paydb", "auditor"));
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop(15_000)));
});

afterAll(async () => {
  await lock?.stop(5000);
  for (const pool of [auditorDb, paydb, raildb]) await pool?.end();
  await mesh?.stop();
});

async function reconcile(env: Record<string, string> = {}) {
  const run = await mesh.reconcileOnce(env);
  expect(run.code, run.lines.slice(-5).join("\n")).toBe(0);
  const parsed = run.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { summary: parsed.find((l) => l.event === "reconcile_summary") as { decisions: Record<string, number> }, events: parsed };
}

/**
 * What paydb holds after losing the intent and the PAID write: the payout PROCESSING, unclaimed;
 * no submission. What the rail holds: the payment (`amountMinor` lets a test make it another one's).
 */
async function plantForgottenPayment(payoutId: string, accountId: string, paid: { amountMinor?: number } = {}): Promise<string> {
  await insertPayouts(paydb, [{ payoutId, accountId, amountMinor: 4200n, beneficiary: `ben-${accountId}` }]);
  await paydb.query("UPDATE payouts SET state = 'PROCESSING' WHERE payout_id = $1", [payoutId]);
  const railReference = `rr_${randomBytes(10).toString("hex")}`;
  await raildb.query(
    "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ($1, $2, $3, $4, $5, 'EUR', 'ACCEPTED')",
    [railReference, payoutId, accountId, `ben-${accountId}`, paid.amountMinor ?? 4200],
  );
  return railReference;
}

async function executor(id: string): Promise<ServiceProcess> {
  const e = await startExecutor(mesh, lock, id, { POLL_INTERVAL_MS: "100" });
  started.push(e);
  return e;
}

describe("a rail payment with no intent, for a payout paydb knows", () => {
  it("the reconciler takes the payout as PAID from it and flags it; the next executor pays nothing", async () => {
    const payoutId = "po-unrecorded-paid";
    const railReference = await plantForgottenPayment(payoutId, "acc-unrecorded-paid");
    const run = await reconcile();
    expect(run.summary.decisions.UNRECORDED).toBe(1);
    const flagged = run.events.find((l) => l.event === "payment_without_intent" && l.payout_id === payoutId);
    expect(flagged).toMatchObject({ level: "error", rail_reference: railReference, applied: true, payout_state: "PROCESSING" });
    expect((await payoutStates(paydb, [payoutId])).get(payoutId)).toMatchObject({ state: "PAID", rail_reference: railReference });

    // A second run changes nothing (the payout is PAID with that payment now).
    expect((await reconcile()).summary.decisions.UNRECORDED).toBe(0);
    await executor("exec-unrecorded-paid");
    await quietFor(2000, "the executor paying the payout again: it may not");
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
  });

  it("a payment naming the payout but paying another amount is flagged, never taken as the payout's", async () => {
    const payoutId = "po-unrecorded-other";
    await plantForgottenPayment(payoutId, "acc-unrecorded-other", { amountMinor: 999_999 });
    const run = await reconcile();
    expect(run.summary.decisions.UNRECORDED).toBe(1);
    expect(run.events.find((l) => l.event === "payment_without_intent" && l.payout_id === payoutId)).toMatchObject({
      level: "error",
      content_differs: ["amount_minor"],
    });
    expect((await payoutStates(paydb, [payoutId])).get(payoutId)).toMatchObject({ state: "PROCESSING" });
  });

  it("negative control: with the pass off nothing notices, the next executor pays it again, and the audit names it", async () => {
    const payoutId = "po-unrecorded-blind";
    await plantForgottenPayment(payoutId, "acc-unrecorded-blind");
    const blind = await reconcile({ UNRECORDED_PAYMENT_WATCH_MS: "0" });
    expect(blind.summary.decisions.UNRECORDED).toBe(0);
    expect((await payoutStates(paydb, [payoutId])).get(payoutId)).toMatchObject({ state: "PROCESSING" });
    await executor("exec-unrecorded-blind");
    await eventually(async () => (await payoutStates(paydb, [payoutId])).get(payoutId)?.state === "PAID" || undefined, "the executor to pay it", 30_000);
    expect((await railPaymentCounts(raildb, [payoutId], "ACCEPTED")).get(payoutId)).toBe(2);
    const audit = await runAudit(auditorDb, ledgerStatement(raildb), {});
    const named = audit.violations.filter((v) => JSON.stringify(v.row).includes(payoutId)).map((v) => v.invariant);
    expect(named).toContain("INV-02");
  });
});
