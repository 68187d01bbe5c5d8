/**
 * A rail answer whose status is not one the rail protocol documents (left unset, or a value this
 * build does not know, as a rail that adds PENDING would send) proves nothing about the money.
 * The rail-stub books the payment and answers so; the proxy must record the submission as
 * ambiguous (never REJECTED, which would make the payout "provably not paid" and re-open it to
 * a second submission), the executor leaves the payout UNKNOWN, and the reconciler closes it
 * from the statement, where the payment is booked. The rail books it once.
 *
 * The reading is one function (services/shared/domain/rail-status.ts) for the proxy and the reconciler;
 * its negative control (the old reading, "anything but ACCEPTED is REJECTED") is injected into
 * the admission in services/rail-proxy/admission.test.ts.
 */
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorInfo, errorReason } from "../../services/shared/domain/errors.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { eventually, expectRejected } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";
import {
  insertPayouts,
  PAYOUT_OF_REFERENCE,
  payoutStates,
  poolFor,
  proxyClient,
  railPaymentCounts,
  setFaults,
  startExecutor,
  startLock,
} from "../executor/support.js";

/** Short proxy timings, so a settlement window the reconciler accepts is a few seconds. */
const PROXY_TIMING = { RAIL_DEADLINE_MS: "500", AMBIGUITY_MARGIN_MS: "1000", ADMISSION_TIMEOUT_MS: "2000" };

let mesh: Mesh;
let paydb: pg.Pool;
let raildb: pg.Pool;
let lock: ServiceProcess;

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, proxyEnv: PROXY_TIMING });
  await mesh.start();
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
  lock = await startLock(mesh);
});

afterAll(async () => {
  await lock?.stop();
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

async function submission(payoutId: string) {
  const { rows } = await paydb.query<{ payout_id: string; state: string; ambiguity_cause: string | null; rail_reason: string | null }>(
    "SELECT payout_id, state, ambiguity_cause, rail_reason FROM rail_submissions WHERE bound_payout_id = $1 ORDER BY created_at",
    [payoutId],
  );
  return rows;
}

const FAULTS = [
  ["left unset (the proto3 default)", FaultKind.LAND_THEN_ANSWER_STATUS_UNSET, "UNSPECIFIED", "unset"],
  ["a value the proto does not define", FaultKind.LAND_THEN_ANSWER_STATUS_UNKNOWN, "7", "undef"],
] as const;

describe("a rail status nobody documented is ambiguous, never 'not paid'", () => {
  it.each(FAULTS)(
    "status %s: the proxy records TIMEOUT (RAIL_STATUS_UNKNOWN) and refuses a second submission of the payout",
    async (_what, kind, name, tag) => {
      const payoutId = `po-status-${tag}`;
      const accountId = `acc-status-${tag}`;
      await setFaults(mesh, [{ kind, count: 1, clientReferencePrefix: payoutId }]);
      const request = { accountId, payoutId, fencingToken: 5n, amount: { amountMinor: 4100n, currency: "EUR" }, beneficiary: "ben-status" };
      const err = await proxyClient(mesh)
        .submitPayout(await fencedFor(paydb, request))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(errorReason(err), String(err)).toBe("RAIL_AMBIGUOUS");
      expect(errorInfo(err)?.metadata.cause).toBe("RAIL_STATUS_UNKNOWN");
      expect(await submission(payoutId)).toEqual([
        { payout_id: payoutId, state: "TIMEOUT", ambiguity_cause: "RAIL_STATUS_UNKNOWN", rail_reason: `RAIL_STATUS_${name}` },
      ]);
      // The payout re-fenced by a newer holder and submitted under another reference: the first
      // submission is still live (it may have paid, and it did), so the proxy refuses.
      const again = { ...request, payoutId: `${payoutId}:t6`, fencingToken: 6n };
      await expectRejected(proxyClient(mesh).submitPayout(await fencedFor(paydb, again)), Code.AlreadyExists, "PAYOUT_ALREADY_SUBMITTED");
      expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
    },
  );

  it("end to end: the executor leaves the payout UNKNOWN (never FAILED), the reconciler finds it PAID on the statement; one payment", async () => {
    const payoutId = "po-status-e2e";
    await setFaults(mesh, [{ kind: FaultKind.LAND_THEN_ANSWER_STATUS_UNSET, count: 1, clientReferencePrefix: payoutId }]);
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-status-e2e" }]);
    const executor = await startExecutor(mesh, lock, "exec-status", { LOG_LEVEL: "info" });
    try {
      const state = await eventually(
        async () => {
          const s = (await payoutStates(paydb, [payoutId])).get(payoutId);
          return s && ["PAID", "FAILED", "UNKNOWN"].includes(s.state) ? s : undefined;
        },
        "the payout to settle",
        30_000,
      );
      expect(state).toMatchObject({ state: "UNKNOWN", failure_reason: "RAIL_AMBIGUOUS" });
    } finally {
      await executor.stop();
    }
    const run = await mesh.reconcileOnce({ ...PROXY_TIMING, SETTLEMENT_WINDOW_MS: "4500" });
    expect(run.code, run.lines.slice(-5).join("\n")).toBe(0);
    const after = (await payoutStates(paydb, [payoutId])).get(payoutId);
    expect(after?.state).toBe("PAID");
    const { rows } = await raildb.query<{ rail_reference: string }>(`SELECT rail_reference FROM payments WHERE ${PAYOUT_OF_REFERENCE} = $1`, [payoutId]);
    expect(rows).toHaveLength(1);
    expect(after?.rail_reference).toBe(rows[0]!.rail_reference);
  });
});
