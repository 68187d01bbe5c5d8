/**
 * The reconciler keeps watching its NOT_PAID verdicts. A submission was ambiguous, absent from the
 * rail's statement for the whole settlement window, and resolved NOT_PAID (its payout FAILED). Then
 * the payment shows up on the statement anyway (a rail that booked it late). The next run must
 * record the contradiction on the ledger, flag the payout NEEDS_ATTENTION, and say so loudly —
 * and with the watch switched off (CONTRADICTION_WATCH_MS=0, the negative control) nothing notices.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { fencedByExecutor } from "../support/fenced-payout.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { eventually, proxyClient } from "../support/clients.js";
import { insertPayouts, setFaults } from "../executor/support.js";
import { letTimePass } from "../support/time.js";

const TIMINGS = { RAIL_DEADLINE_MS: "500", AMBIGUITY_MARGIN_MS: "500", ADMISSION_TIMEOUT_MS: "1000" };
const WINDOW_MS = 3000;

const t = useMesh({ proxies: 1, proxyEnv: { ...TIMINGS, SWEEP_INTERVAL_MS: "200" } });

async function reconcile(env: Record<string, string> = {}) {
  const run = await t.mesh.reconcileOnce({ ...TIMINGS, SETTLEMENT_WINDOW_MS: String(WINDOW_MS), ...env });
  expect(run.code, run.lines.slice(-5).join("\n")).toBe(0);
  const parsed = run.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { summary: parsed.find((l) => l.event === "reconcile_summary") as { decisions: Record<string, number> }, events: parsed };
}

async function payout(id: string) {
  const { rows } = await t.paydb.query<{ state: string; attention_reason: string | null }>("SELECT state, attention_reason FROM payouts WHERE payout_id = $1", [
    id,
  ]);
  return rows[0]!;
}

describe("the reconciler's watch over NOT_PAID verdicts", () => {
  it("records a payment that appears after the verdict, flags the payout, and only the watch finds it", async () => {
    const payoutId = "po-watch-1";
    await insertPayouts(t.paydb, [{ payoutId, accountId: "acc-watch", amountMinor: 7700n, beneficiary: "ben-watch" }]);
    await fencedByExecutor(t.paydb, payoutId, 3n);
    // The rail never answers and never books (as far as anyone can tell yet).
    await setFaults(t.mesh, [{ kind: FaultKind.NEVER_LAND_HANG, latencyMs: 0, count: 1, clientReferencePrefix: payoutId }]);
    await proxyClient(t.mesh.proxies[0]!.url)
      .submitPayout({ accountId: "acc-watch", payoutId, fencingToken: 3n, amount: { amountMinor: 7700n, currency: "EUR" }, beneficiary: "ben-watch" })
      .catch(() => undefined);
    await t.paydb.query("UPDATE payouts SET state = 'UNKNOWN' WHERE payout_id = $1", [payoutId]);

    // Absent for the whole window: NOT_PAID, payout FAILED.
    await letTimePass(WINDOW_MS + 500, "the settlement window passes with the payment absent");
    await eventually(async () => (await reconcile()).summary.decisions.NOT_PAID === 1 || undefined, "the NOT_PAID verdict", 20_000);
    expect(await payout(payoutId)).toMatchObject({ state: "FAILED" });

    // The payment appears on the rail's statement afterwards.
    await t.raildb.query(
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
    const { rows } = await t.paydb.query<{ contradicted_at: Date | null; contradicting_rail_reference: string | null; state: string }>(
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
