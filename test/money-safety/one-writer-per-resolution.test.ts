/**
 * One writer per fact on the reconciliation path (decision 066). A resolution closes its payout in
 * the statement that resolves the submission, with the fence rule in that SQL; nobody has to come
 * back and write the payout afterwards, and the reconciler's role can no longer write one.
 *
 * The one race that statement cannot see is reproduced for real: an executor (its own login)
 * writes UNKNOWN in an open transaction while a NOT_PAID resolution commits; under read committed
 * neither sees the other, and the payout is left UNKNOWN with nothing ambiguous. rail-proxy's
 * sweeper closes it. Negative control: a proxy whose sweeper does not come round leaves it
 * UNKNOWN, and the daily audit names it (UNKNOWN_UNLISTED).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { fencedByExecutor } from "../support/fenced-payout.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import { runAudit } from "../../services/cli/audit/audit.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { ResolutionOutcome } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { eventually, proxyClient } from "../support/clients.js";
import { insertPayouts, setFaults } from "../executor/support.js";

// The first proxy's sweeper runs once at start and not again during this file: it is the control.
const TIMINGS = { RAIL_DEADLINE_MS: "500", AMBIGUITY_MARGIN_MS: "500", ADMISSION_TIMEOUT_MS: "1000" };

const t = useMesh({ proxies: 1, proxyEnv: { ...TIMINGS, SWEEP_INTERVAL_MS: "600000" } });
let seq = 0;

const proxy = () => proxyClient(t.mesh.proxies[0]!.url);

/** A payout with one ambiguous submission under `token` (the rail never answers it, never books it). */
async function ambiguous(token = 3n): Promise<string> {
  const payoutId = `po-one-writer-${++seq}`;
  const accountId = `acc-one-writer-${seq}`;
  await insertPayouts(t.paydb, [{ payoutId, accountId, amountMinor: 4200n, beneficiary: "ben-one-writer" }]);
  await fencedByExecutor(t.paydb, payoutId, token, "executor-a");
  await setFaults(t.mesh, [{ kind: FaultKind.NEVER_LAND_HANG, latencyMs: 0, count: 1, clientReferencePrefix: payoutId }]);
  const err = await proxy()
    .submitPayout({ accountId, payoutId, fencingToken: token, amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-one-writer" })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(errorReason(err)).toBe("RAIL_AMBIGUOUS");
  return payoutId;
}

async function payout(id: string) {
  const { rows } = await t.paydb.query<{
    state: string;
    fence: string;
    failure_reason: string | null;
    rail_reference: string | null;
    attention_reason: string | null;
  }>("SELECT state, fence::text, failure_reason, rail_reference, attention_reason FROM payouts WHERE payout_id = $1", [id]);
  return rows[0]!;
}

const notPaid = (payoutId: string, failureReason = "") =>
  proxy().resolveSubmission({
    payoutId,
    outcome: ResolutionOutcome.NOT_PAID,
    actor: "test",
    note: "absent from the statement all window",
    force: true,
    failureReason,
  });
const paid = (payoutId: string, railReference: string) =>
  proxy().resolveSubmission({ payoutId, outcome: ResolutionOutcome.PAID, actor: "test", note: "on the statement", railReference });

describe("a resolution closes its payout in the same statement", () => {
  it("NOT_PAID fails the payout waiting on this attempt, with the reason it was given", async () => {
    const id = await ambiguous();
    const res = await notPaid(id, "NOT_ON_RAIL_STATEMENT");
    expect(res.payoutState).toBe("FAILED");
    expect(await payout(id)).toMatchObject({ state: "FAILED", failure_reason: "NOT_ON_RAIL_STATEMENT" });
  });

  it("without a reason, NOT_PAID fails it RESOLVED_NOT_PAID", async () => {
    const id = await ambiguous();
    await notPaid(id);
    expect(await payout(id)).toMatchObject({ state: "FAILED", failure_reason: "RESOLVED_NOT_PAID" });
  });

  it("PAID closes an UNKNOWN payout PAID with the payment's reference", async () => {
    const id = await ambiguous();
    await t.paydb.query("UPDATE payouts SET state = 'UNKNOWN' WHERE payout_id = $1", [id]);
    const res = await paid(id, "rr_one_writer_paid");
    expect(res.payoutState).toBe("PAID");
    expect(await payout(id)).toMatchObject({ state: "PAID", rail_reference: "rr_one_writer_paid", failure_reason: null });
  });

  it("the fence rule is in the statement: NOT_PAID leaves a newer holder's PROCESSING payout alone", async () => {
    const id = await ambiguous(3n);
    await t.paydb.query("UPDATE payouts SET fence = 5, claimed_by = 'executor-newer' WHERE payout_id = $1", [id]);
    const res = await notPaid(id);
    expect(res.payoutState).toBe("");
    expect(res.submission?.state).toBeDefined();
    expect(await payout(id)).toMatchObject({ state: "PROCESSING", fence: "5", failure_reason: null });
  });

  it("an UNKNOWN payout is failed whatever its fence (it cannot be fenced again)", async () => {
    const id = await ambiguous(3n);
    await t.paydb.query("UPDATE payouts SET fence = 5, state = 'UNKNOWN' WHERE payout_id = $1", [id]);
    expect((await notPaid(id)).payoutState).toBe("FAILED");
    expect(await payout(id)).toMatchObject({ state: "FAILED", fence: "5" });
  });

  it("PAID on a payout the books say FAILED flags it for a human, never leaves it FAILED", async () => {
    const id = await ambiguous();
    await t.paydb.query("UPDATE payouts SET state = 'FAILED', failure_reason = 'WRONG_VERDICT' WHERE payout_id = $1", [id]);
    expect((await paid(id, "rr_one_writer_flag")).payoutState).toBe("NEEDS_ATTENTION");
    expect(await payout(id)).toMatchObject({ state: "NEEDS_ATTENTION", attention_reason: "PAID_BUT_FAILED", failure_reason: "WRONG_VERDICT" });
  });

  it.each([
    ["a failure reason on PAID", { outcome: ResolutionOutcome.PAID, railReference: "rr_x", failureReason: "RAIL_REJECTED" }],
    ["a failure reason that is not an upper-case code", { outcome: ResolutionOutcome.NOT_PAID, force: true, failureReason: "not paid!" }],
  ])("refuses %s (INVALID_ARGUMENT, FIELD_INVALID) and changes nothing", async (_what, fields) => {
    const id = await ambiguous();
    const err = await proxy()
      .resolveSubmission({ payoutId: id, actor: "test", note: "a long enough note", ...fields })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err?.code).toBe(Code.InvalidArgument);
    expect(errorReason(err)).toBe("FIELD_INVALID");
    expect(await payout(id)).toMatchObject({ state: "PROCESSING" });
    expect((await proxy().getSubmission({ payoutId: id })).submission?.ambiguous).toBe(true);
  });
});

describe("the reconciler writes no payout", () => {
  it("its role cannot write a payout's state; the one move it owns goes through payout_paid_without_intent", async () => {
    const id = await ambiguous();
    const denied = await t
      .roleDb("paydb", "reconciler")
      .query("UPDATE payouts SET state = 'FAILED', failure_reason = 'x' WHERE payout_id = $1", [id])
      .then(
        () => "ok",
        (e: { code?: string }) => e.code,
      );
    expect(denied).toBe("42501");
    // The function leaves a payout with an ambiguous submission alone (that is the first pass's).
    expect((await t.roleDb("paydb", "reconciler").query("SELECT payout_paid_without_intent($1, 'rr_x') AS after", [id])).rows[0].after).toBeNull();
    expect(await payout(id)).toMatchObject({ state: "PROCESSING" });
  });
});

describe("an executor's UNKNOWN racing a resolution", () => {
  it("leaves the payout UNKNOWN with nothing ambiguous; the sweeper closes it, and without it the audit names it", async () => {
    const id = await ambiguous(3n);
    // A newer holder (token 5) found the old submission still live and records UNKNOWN...
    await t.paydb.query("UPDATE payouts SET fence = 5, claimed_by = 'executor-newer' WHERE payout_id = $1", [id]);
    const holder = await t.roleDb("paydb", "executor").connect();
    try {
      await holder.query("BEGIN");
      await holder.query("UPDATE payouts SET state = 'UNKNOWN', updated_at = now() WHERE payout_id = $1 AND fence = 5", [id]);
      // ...while the resolution commits: it sees a newer holder's PROCESSING payout and leaves it.
      expect((await notPaid(id)).payoutState).toBe("");
      await holder.query("COMMIT");
    } finally {
      holder.release();
    }
    expect(await payout(id)).toMatchObject({ state: "UNKNOWN" });

    // Negative control: this proxy's sweeper does not come round; the payout stays UNKNOWN and the
    // daily audit names it.
    const before = await runAudit(t.roleDb("paydb", "auditor"), ledgerStatement(t.raildb));
    expect(before.violations.filter((v) => JSON.stringify(v.row).includes(id)).map((v) => v.invariant)).toContain("UNKNOWN_UNLISTED");

    // A proxy whose sweeper runs closes it from the submission that decides it.
    await t.mesh.addProxy({ ...TIMINGS, SWEEP_INTERVAL_MS: "200" });
    await eventually(async () => ((await payout(id)).state === "FAILED" ? true : undefined), "the sweeper closes the payout", 15_000);
    expect(await payout(id)).toMatchObject({ state: "FAILED", failure_reason: "RESOLVED_NOT_PAID", fence: "5" });
    const after = await runAudit(t.roleDb("paydb", "auditor"), ledgerStatement(t.raildb));
    expect(after.violations.filter((v) => JSON.stringify(v.row).includes(id))).toEqual([]);
  });
});
