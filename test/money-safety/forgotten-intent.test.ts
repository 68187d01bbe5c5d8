/**
 * A submission paydb forgot is never paid again blind (issue: paydb failover; decision 023).
 *
 * The executor submits; the rail books the payment and its answer is slow, so the executor's call
 * times out (a lost answer). Before the executor asks GetSubmission, the intent is removed from
 * paydb, as a failover to a standby that had not received it (or a restore to an earlier point)
 * would remove it. The proxy then says NOT_FOUND.
 *
 * - Before: NOT_FOUND was read as "the intent never committed; the rail was not called"; the next
 *   attempt found no submission of the payout and submitted again: paid twice, by honest processes.
 * - Now the executor records the lost submission on the payout, and the next attempt reads the
 *   rail's own statement (through the proxy): the payment is there, so the payout is PAID from it,
 *   once. When the rail booked nothing (the proxy died before its admission committed), the
 *   payout is paid once the statement covers the window after the loss and shows nothing.
 * - Negative control (EXECUTOR_TRUST_NOT_FOUND, harness only): the old reading pays it twice, and
 *   the audit's INV-02 names the payout.
 */
import type pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import { runAudit } from "../../services/cli/audit/audit.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { eventually } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, payoutStates, poolFor, railPaymentCounts, setFaults, startExecutor, startLock, waitForLog } from "../executor/support.js";
import { quietFor } from "../support/time.js";

/** The executor's statement window in this test: short, so "absent means not paid" comes quickly. */
const WINDOW_MS = 2000;
let mesh: Mesh;
let lock: ServiceProcess;
let paydb: pg.Pool;
let raildb: pg.Pool;
let auditorDb: pg.Pool;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, proxyEnv: { RAIL_DEADLINE_MS: "8000", AMBIGUITY_MARGIN_MS: "2000" } });
  await mesh.start();
  lock = await startLock(mesh);
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
  auditorDb = poolFor(mesh.roleUrl("paydb", "auditor"));
});

afterEach(async () => {
  await setFaults(mesh, []);
  await Promise.all(started.splice(0).map((p) => p.stop(15_000)));
});

afterAll(async () => {
  await lock?.stop(5000);
  for (const pool of [auditorDb, paydb, raildb]) await pool?.end();
  await mesh?.stop();
});

async function executor(id: string, env: Record<string, string> = {}): Promise<ServiceProcess> {
  const e = await startExecutor(mesh, lock, id, {
    LOG_LEVEL: "info",
    CALL_TIMEOUT_MS: "2500",
    POLL_INTERVAL_MS: "100",
    SETTLEMENT_WINDOW_MS: String(WINDOW_MS),
    CLOCK_SKEW_ALLOWANCE_MS: "0",
    ...env,
  });
  started.push(e);
  return e;
}

/** What a failover to a standby that had not received it does to an intent: it is gone (as the owner). */
async function forgetIntentsOf(payoutId: string): Promise<number> {
  await paydb.query("ALTER TABLE rail_submissions DISABLE TRIGGER rail_submissions_guarded");
  try {
    const { rowCount } = await paydb.query("DELETE FROM rail_submissions WHERE bound_payout_id = $1", [payoutId]);
    return rowCount ?? 0;
  } finally {
    await paydb.query("ALTER TABLE rail_submissions ENABLE TRIGGER rail_submissions_guarded");
  }
}

/**
 * The reproduction: the rail books the first submission and answers after 5 s (the executor gives
 * up at 2.5 s); `landed` says whether it books at all. The intent is forgotten once the call is
 * at the rail, before the executor asks about it.
 */
async function loseIntent(payoutId: string, accountId: string, env: Record<string, string>, landed: boolean) {
  await setFaults(mesh, [
    { kind: landed ? FaultKind.LAND_THEN_LOSE_ANSWER : FaultKind.NEVER_LAND_HANG, latencyMs: 5000, count: 1, clientReferencePrefix: payoutId },
  ]);
  await insertPayouts(paydb, [{ payoutId, accountId }]);
  const e = await executor(`exec-${payoutId}`, env);
  // The call is at the rail (booked, or hanging): its intent is committed and FORWARDING.
  await eventually(async () => {
    const { rows } = await paydb.query("SELECT 1 FROM rail_submissions WHERE bound_payout_id = $1 AND state = 'FORWARDING'", [payoutId]);
    return rows.length > 0;
  }, "the intent to be at the rail");
  expect(await forgetIntentsOf(payoutId)).toBe(1);
  return e;
}

async function terminal(payoutId: string) {
  return eventually(
    async () => {
      const s = (await payoutStates(paydb, [payoutId])).get(payoutId);
      return s && ["PAID", "FAILED", "UNKNOWN", "NEEDS_ATTENTION"].includes(s.state) ? s : undefined;
    },
    `${payoutId} to reach a terminal state`,
    40_000,
  );
}

describe("a submission paydb forgot after its answer was lost", () => {
  it("the rail paid it: the payout is PAID from the rail's statement, and never submitted again", async () => {
    const payoutId = "po-forgot-paid";
    const e = await loseIntent(payoutId, "acc-forgot-paid", {}, true);
    await waitForLog(e, (l) => l.event === "submission_not_found_after_lost_answer" && l.payout_id === payoutId, "NOT_FOUND after the lost answer");
    const state = await terminal(payoutId);
    expect(state).toMatchObject({ state: "PAID" });
    const verdict = await waitForLog(
      e,
      (l) => l.event === "forgotten_submission" && l.payout_id === payoutId && l.verdict === "paid",
      "the statement's verdict",
    );
    expect(verdict.level).toBe("error");
    await quietFor(1500, "a second submission: none may happen");
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
    const { rows } = await raildb.query<{ rail_reference: string }>("SELECT rail_reference FROM payments WHERE client_reference = $1", [payoutId]);
    expect(state?.rail_reference).toBe(rows[0]!.rail_reference);
  });

  it("the rail booked nothing: once the statement covers the window after the loss, the payout is paid, once", async () => {
    const payoutId = "po-forgot-unpaid";
    const e = await loseIntent(payoutId, "acc-forgot-unpaid", {}, false);
    const state = await terminal(payoutId);
    expect(state).toMatchObject({ state: "PAID" });
    const waited = await waitForLog(
      e,
      (l) => l.event === "forgotten_submission" && l.payout_id === payoutId && l.verdict === "not-paid",
      "the not-paid verdict",
    );
    // Not resubmitted before the window after the loss had passed.
    expect(Date.parse(String(waited.time))).toBeGreaterThanOrEqual(Date.parse(String(waited.lost_at)) + WINDOW_MS);
    expect((await railPaymentCounts(raildb, [payoutId], "ACCEPTED")).get(payoutId)).toBe(1);
  });

  it("negative control: read as 'never sent' (the old reading), it is paid twice, and the audit names it", async () => {
    const payoutId = "po-forgot-trusted";
    const e = await loseIntent(payoutId, "acc-forgot-trusted", { EXECUTOR_TRUST_NOT_FOUND: "true" }, true);
    expect(await terminal(payoutId)).toMatchObject({ state: "PAID" });
    expect((await railPaymentCounts(raildb, [payoutId], "ACCEPTED")).get(payoutId)).toBe(2);
    expect(e.lines.some((l) => l.includes("forgotten_submission"))).toBe(false);
    const audit = await runAudit(auditorDb, ledgerStatement(raildb), {});
    const named = audit.violations.filter((v) => JSON.stringify(v.row).includes(payoutId)).map((v) => v.invariant);
    expect(named).toContain("INV-02");
  });
});
