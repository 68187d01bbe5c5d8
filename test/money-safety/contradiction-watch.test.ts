/**
 * The reconciler keeps watching its NOT_PAID verdicts. A submission was ambiguous, absent from the
 * rail's statement for the whole settlement window, and resolved NOT_PAID (its payout FAILED). Then
 * the payment shows up on the statement anyway (a rail that booked it late). The next run must
 * record the contradiction on the ledger, flag the payout NEEDS_ATTENTION, and say so loudly —
 * and with the watch switched off (CONTRADICTION_WATCH_MS=0, the negative control) nothing notices.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { eventually, proxyClient } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, poolFor, setFaults } from "../executor/support.js";
import { letTimePass } from "../support/time.js";

const TIMINGS = { RAIL_DEADLINE_MS: "500", AMBIGUITY_MARGIN_MS: "500", ADMISSION_TIMEOUT_MS: "1000" };
const WINDOW_MS = 3000;

let mesh: Mesh;
let paydb: pg.Pool;
let raildb: pg.Pool;

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, proxyEnv: { ...TIMINGS, SWEEP_INTERVAL_MS: "200" } });
  await mesh.start();
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

async function reconcile(env: Record<string, string> = {}) {
  const run = await mesh.reconcileOnce({ ...TIMINGS, SETTLEMENT_WINDOW_MS: String(WINDOW_MS), ...env });
  expect(run.code, run.lines.slice(-5).join("\n")).toBe(0);
  const parsed = run.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { summary: parsed.find((l) => l.event === "reconcile_summary") as { decisions: Record<string, number> }, events: parsed };
}

async function payout(id: string) {
  const { rows } = await paydb.query<{ state: string; attention_reason: string | null }>("SELECT state, attention_reason FROM payouts WHERE payout_id = $1", [
    id,
  ]);
  return rows[0]!;
}

describe("the reconciler's watch over NOT_PAID verdicts", () => {
  it("records a payment that appears after the verdict, flags the payout, and only the watch finds it", async () => {
    const payoutId = "po-watch-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-watch", amountMinor: 7700n, beneficiary: "ben-watch" }]);
    await paydb.query("UPDATE payouts SET fence = 3, state = 'PROCESSING' WHERE payout_id = $1", [payoutId]);
    // The rail never answers and never books (as far as anyone can tell yet).
    await setFaults(mesh, [{ kind: FaultKind.NEVER_LAND_HANG, latencyMs: 0, count: 1, clientReferencePrefix: payoutId }]);
    await proxyClient(mesh.proxies[0]!.url)
      .submitPayout({ accountId: "acc-watch", payoutId, fencingToken: 3n, amount: { amountMinor: 7700n, currency: "EUR" }, beneficiary: "ben-watch" })
      .catch(() => undefined);
    await paydb.query("UPDATE payouts SET state = 'UNKNOWN' WHERE payout_id = $1", [payoutId]);

    // Absent for the whole window: NOT_PAID, payout FAILED.
    await letTimePass(WINDOW_MS + 500, "the settlement window passes with the payment absent");
    await eventually(async () => (await reconcile()).summary.decisions.NOT_PAID === 1 || undefined, "the NOT_PAID verdict", 20_000);
    expect(await payout(payoutId)).toMatchObject({ state: "FAILED" });

    // The payment appears on the rail's statement afterwards.
    await raildb.query(
      "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ($1, $2, 'acc-watch', 'ben-watch', 7700, 'EUR', 'ACCEPTED')",
      [`rr_${randomBytes(10).toString("hex")}`, payoutId],
    );

    // Negative control: without the watch, nothing notices.
    const blind = await reconcile({ CONTRADICTION_WATCH_MS: "0" });
    expect(blind.summary.decisions.CONTRADICTED).toBe(0);
    expect(await payout(payoutId)).toMatchObject({ state: "FAILED" });

    const watching = await reconcile();
    expect(watching.summary.decisions.CONTRADICTED).toBe(1);
    expect(watching.events.some((e) => e.event === "resolution_contradicted" && e.level === "error")).toBe(true);
    expect(await payout(payoutId)).toEqual({ state: "NEEDS_ATTENTION", attention_reason: "RESOLUTION_CONTRADICTED" });
    const { rows } = await paydb.query<{ contradicted_at: Date | null; contradicting_rail_reference: string | null; state: string }>(
      "SELECT contradicted_at, contradicting_rail_reference, state FROM rail_submissions WHERE payout_id = $1",
      [payoutId],
    );
    expect(rows[0]!.state).toBe("RESOLVED_NOT_PAID");
    expect(rows[0]!.contradicted_at).not.toBeNull();
    expect(rows[0]!.contradicting_rail_reference).toMatch(/^rr_/);

    // Recorded once: a further run finds nothing new.
    expect((await reconcile()).summary.decisions.CONTRADICTED).toBe(0);
  });
});
