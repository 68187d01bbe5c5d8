/**
 * One payout, one payment, whatever reference an executor presents. Executors here run in
 * EXECUTOR_SUBMISSION_REFERENCE=attempt mode (`<payout>:t<token>`, a fresh reference per attempt,
 * the mode drills use), so the proxy's primary key cannot help; what must hold is the proxy's
 * one-live-submission-per-payout guard and the executor's own bookkeeping.
 *
 * (a) The proxy is SIGKILLed after the rail booked `po:t1` and stays down for a while: every
 *     attempt in between fails to ask about the earlier submission. When the proxy is back, the
 *     payout must settle on that one payment, never be paid again.
 * (b) A slow rail, with the executor's call timeout shorter than the proxy's deadline: a later
 *     attempt finds the first submission still FORWARDING and must wait for it, not conclude
 *     from a lookup of its own (never submitted) reference that nothing was paid.
 */
import type pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { eventually } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, poolFor, setFaults, startExecutor, startLock } from "../executor/support.js";
import { letTimePass, quietFor } from "../support/time.js";

const RAIL_DEADLINE_MS = 5000;
const AMBIGUITY_MARGIN_MS = 1000;

let mesh: Mesh;
let lock: ServiceProcess;
let paydb: pg.Pool;
let raildb: pg.Pool;
const executors: ServiceProcess[] = [];

beforeAll(async () => {
  mesh = testMesh({
    proxies: 1,
    proxyEnv: { RAIL_DEADLINE_MS: String(RAIL_DEADLINE_MS), AMBIGUITY_MARGIN_MS: String(AMBIGUITY_MARGIN_MS), SWEEP_INTERVAL_MS: "200" },
  });
  await mesh.start();
  lock = await startLock(mesh);
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
});

afterEach(async () => {
  await Promise.all(executors.splice(0).map((e) => e.stop(10_000)));
  if (!mesh.proxies[0]!.running) await mesh.proxies[0]!.restart();
  await setFaults(mesh, []);
});

afterAll(async () => {
  await lock?.stop(5000);
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

/** Accepted rail payments whose reference belongs to the payout (any attempt of it). */
async function paymentsOf(payoutId: string): Promise<string[]> {
  const { rows } = await raildb.query<{ client_reference: string }>(
    "SELECT client_reference FROM payments WHERE status = 'ACCEPTED' AND (client_reference = $1 OR client_reference LIKE $1 || ':t%') ORDER BY sequence",
    [payoutId],
  );
  return rows.map((r) => r.client_reference);
}

async function payoutState(payoutId: string): Promise<string> {
  const { rows } = await paydb.query<{ state: string }>("SELECT state FROM payouts WHERE payout_id = $1", [payoutId]);
  return rows[0]!.state;
}

function attemptExecutor(id: string, callTimeoutMs: number) {
  return startExecutor(mesh, lock, id, {
    EXECUTOR_SUBMISSION_REFERENCE: "attempt",
    EXECUTOR_CONCURRENCY: "1",
    LEASE_TTL_MS: "1000",
    LOCK_WAIT_MS: "500",
    CALL_TIMEOUT_MS: String(callTimeoutMs),
  }).then((e) => (executors.push(e), e));
}

describe("attempt references: one payout is paid at most once", () => {
  it("(a) the proxy dies after the rail booked the first attempt and stays down: no second payment", async () => {
    const payoutId = "po-attempt-a";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-attempt-a", amountMinor: 3100n }]);
    // The rail books at once and then holds the answer: the proxy is mid-call when it dies.
    await setFaults(mesh, [{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 30_000, count: 1, clientReferencePrefix: payoutId }]);
    const executor = await attemptExecutor("executor-attempt-a", 1000);
    await eventually(async () => (await paymentsOf(payoutId)).length === 1, "the rail to book the first attempt");

    const proxy = mesh.proxies[0]!;
    const exited = proxy.waitExit();
    proxy.kill("SIGKILL");
    await exited;
    await letTimePass(4000, "the replica down long enough for several attempts to fail their lookups");
    await proxy.restart();

    // The first submission is ambiguous now (its replica died mid-call): the payout waits for
    // the reconciler as UNKNOWN. Give the executor time to do anything it would do.
    await eventually(async () => ["UNKNOWN", "PAID", "FAILED"].includes(await payoutState(payoutId)), "the payout to leave PROCESSING", 30_000);
    await quietFor(3000, "anything further the executor would do: no second payment");
    expect(await paymentsOf(payoutId)).toHaveLength(1);
    expect(await payoutState(payoutId)).toBe("UNKNOWN");
    await executor.stop(10_000);

    const run = await mesh.reconcileOnce({ SETTLEMENT_WINDOW_MS: "30000" });
    expect(run.code).toBe(0);
    expect(await payoutState(payoutId)).toBe("PAID");
    expect(await paymentsOf(payoutId)).toHaveLength(1);
  });

  it("(b) a slow rail and a short call timeout: a later attempt waits for the earlier one, no second payment", async () => {
    const payoutId = "po-attempt-b";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-attempt-b", amountMinor: 3200n }]);
    // The rail answers after 4 s: inside the proxy's 5 s deadline, well past the executor's 1 s.
    await setFaults(mesh, [{ kind: FaultKind.LATENCY, latencyMs: 4000, count: 1, clientReferencePrefix: payoutId }]);
    await attemptExecutor("executor-attempt-b", 1000);
    await eventually(async () => (await payoutState(payoutId)) === "PAID", "the payout to be PAID", 30_000);
    await quietFor(3000, "any further attempt: none may pay again");
    expect(await paymentsOf(payoutId)).toHaveLength(1);
  });
});
