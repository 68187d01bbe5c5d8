/**
 * UC-05 end to end with real processes: PostgreSQL, rail-stub, two rail-proxies, the lock
 * service and executor processes. Money is always counted on the rail's own ledger (raildb),
 * never on paydb's opinion of it (INV-02).
 *
 * Each test uses its own payout-id prefix and accounts, and stops the executors it started,
 * so tests do not depend on order.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { testMesh } from "../support/test-mesh.js";
import {
  insertPayouts,
  lockClient,
  logEvents,
  PAYOUT_OF_REFERENCE,
  payoutStates,
  poolFor,
  railPaymentCounts,
  setFaults,
  startExecutor,
  startLock,
  waitForLog,
  waitForLogs,
} from "./support.js";
import { eventually } from "../support/clients.js";
import { quietFor } from "../support/time.js";

const TERMINAL = new Set(["PAID", "FAILED", "UNKNOWN"]);
/** The proxies' rail deadline: short, so "the rail never answered" resolves quickly. */
const RAIL_DEADLINE_MS = 3000;

let mesh: Mesh;
let lock: ServiceProcess;
let paydb: pg.Pool;
let raildb: pg.Pool;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  mesh = testMesh({ proxies: 2, proxyEnv: { RAIL_DEADLINE_MS: String(RAIL_DEADLINE_MS), AMBIGUITY_MARGIN_MS: "1000" } });
  await mesh.start();
  lock = await startLock(mesh);
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
});

afterEach(async () => {
  await setFaults(mesh, []);
  const codes = await Promise.all(started.splice(0).map((p) => p.stop(15_000)));
  // Graceful drain: every executor exits 0 on SIGTERM.
  expect(codes.every((c) => c === 0)).toBe(true);
});

afterAll(async () => {
  await lock?.stop(5000);
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

async function executor(id: string, env: Record<string, string> = {}, opts: { logDelayMs?: number } = {}): Promise<ServiceProcess> {
  const e = await startExecutor(mesh, lock, id, { LOG_LEVEL: "info", ...env }, opts);
  started.push(e);
  return e;
}

async function waitTerminal(ids: string[], timeoutMs = 60_000) {
  return eventually(
    async () => {
      const states = await payoutStates(paydb, ids);
      return ids.every((id) => TERMINAL.has(states.get(id)?.state ?? "")) ? states : undefined;
    },
    `${ids.length} payouts to reach a terminal state`,
    timeoutMs,
  );
}

describe("executors (UC-05)", () => {
  it("two executors pay 200 payouts over 20 accounts, each exactly once on the rail", async () => {
    const seeds = Array.from({ length: 200 }, (_, i) => ({ payoutId: `po-bulk-${i}`, accountId: `acc-bulk-${i % 20}`, amountMinor: BigInt(100 + i) }));
    await insertPayouts(paydb, seeds);
    const ids = seeds.map((s) => s.payoutId);
    const [a, b] = await Promise.all([executor("exec-bulk-a"), executor("exec-bulk-b")]);

    const states = await waitTerminal(ids);
    expect([...states.values()].filter((r) => r.state !== "PAID")).toEqual([]);
    const counts = await railPaymentCounts(raildb, ids, "ANY");
    expect([...counts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    // Every payout's rail reference is the one the rail booked for it.
    const { rows } = await raildb.query<{ payout_id: string; rail_reference: string }>(
      `SELECT ${PAYOUT_OF_REFERENCE} AS payout_id, rail_reference FROM payments WHERE ${PAYOUT_OF_REFERENCE} = ANY($1)`,
      [ids],
    );
    for (const r of rows) expect(states.get(r.payout_id)?.rail_reference).toBe(r.rail_reference);
    // Both executors did work (claims are spread, not serialised behind one worker).
    // Each PAID attempt is logged after its row: wait for all 200 lines, not just the rows.
    const paidBy = (e: ServiceProcess) => logEvents(e).filter((l) => l.event === "payout_attempt" && l.outcome === "PAID").length;
    await eventually(async () => paidBy(a!) + paidBy(b!) >= 200, "200 PAID attempt lines", 15_000);
    expect(paidBy(a!) + paidBy(b!)).toBe(200);
    expect(paidBy(a!)).toBeGreaterThan(0);
    expect(paidBy(b!)).toBeGreaterThan(0);
  });

  it("a stale executor resumed after another took over is FENCED_OUT by the proxy; the rail pays once", async () => {
    const payoutId = "po-stale-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-stale" }]);
    // A: short lease and claim, and it holds still right before SubmitPayout.
    // (A call timeout of 3 s: its SubmitPayout must be answered, FENCED_OUT, even on a loaded machine.)
    const a = await executor("exec-stale-a", { LEASE_TTL_MS: "300", CALL_TIMEOUT_MS: "3000", EXECUTOR_PAUSE_AFTER_FENCE_MS: "2000" });
    const fencedA = await eventually(async () => logEvents(a).find((l) => l.event === "fenced" && l.payout_id === payoutId), "A to fence the payout", 15_000);
    // Freeze A inside its pause: its timer can only fire once we let it run again.
    a.pause();
    try {
      const b = await executor("exec-stale-b");
      const paid = await eventually(
        async () => {
          const r = (await payoutStates(paydb, [payoutId])).get(payoutId);
          return r?.state === "PAID" ? r : undefined;
        },
        "B to pay",
        30_000,
      );
      expect(BigInt(paid.fence)).toBeGreaterThan(BigInt(fencedA.fencing_token as string));
      await waitForLog(b, (l) => l.event === "fenced" && l.payout_id === payoutId, "its fence");
    } finally {
      a.resume();
    }
    const outcome = await eventually(
      async () => logEvents(a).find((l) => l.event === "payout_attempt" && l.payout_id === payoutId),
      "A's attempt to end",
      15_000,
    );
    expect(outcome).toMatchObject({ outcome: "FENCED_OUT", where: "proxy", fencing_token: fencedA.fencing_token });
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
    const after = (await payoutStates(paydb, [payoutId])).get(payoutId);
    expect(after?.state).toBe("PAID");
  });

  it("a payout the rail rejects ends FAILED with the rail's reason", async () => {
    await setFaults(mesh, [{ kind: FaultKind.REJECT, clientReferencePrefix: "po-rej-" }]);
    const ids = ["po-rej-1", "po-rej-2"];
    await insertPayouts(
      paydb,
      ids.map((payoutId, i) => ({ payoutId, accountId: `acc-rej-${i}` })),
    );
    await executor("exec-rej");
    const states = await waitTerminal(ids, 30_000);
    for (const id of ids) expect(states.get(id)).toMatchObject({ state: "FAILED", failure_reason: "INJECTED_REJECT" });
    expect([...(await railPaymentCounts(raildb, ids, "ACCEPTED")).values()]).toEqual([0, 0]);
  });

  it("a payment that landed but whose answer was lost ends UNKNOWN and is never resubmitted", async () => {
    await setFaults(mesh, [{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, clientReferencePrefix: "po-lost-rail-" }]);
    const payoutId = "po-lost-rail-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-lost-rail" }]);
    const e = await executor("exec-lost-rail");
    const states = await waitTerminal([payoutId], 30_000);
    expect(states.get(payoutId)).toMatchObject({ state: "UNKNOWN", failure_reason: "RAIL_AMBIGUOUS" });
    await quietFor(1500, "a resubmission: none may happen");
    expect((await railPaymentCounts(raildb, [payoutId])).get(payoutId)).toBe(1);
    expect(logEvents(e).filter((l) => l.event === "fenced" && l.payout_id === payoutId)).toHaveLength(1);
    expect((await payoutStates(paydb, [payoutId])).get(payoutId)?.state).toBe("UNKNOWN");
  });

  it("when the proxy's answer is lost the executor asks GetSubmission and never resubmits", async () => {
    // The rail answers after 1.5 s: within the proxy's deadline, after the executor's call timeout.
    await setFaults(mesh, [{ kind: FaultKind.LATENCY, latencyMs: 1500, clientReferencePrefix: "po-lost-proxy-" }]);
    const payoutId = "po-lost-proxy-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-lost-proxy" }]);
    const e = await executor("exec-lost-proxy", { CALL_TIMEOUT_MS: "700" });
    const states = await waitTerminal([payoutId], 30_000);
    expect(states.get(payoutId)?.state).toBe("PAID");
    await waitForLog(e, (l) => l.event === "submit_answer_lost" && l.payout_id === payoutId, "the lost answer");
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
    const { rows } = await raildb.query<{ rail_reference: string }>(`SELECT rail_reference FROM payments WHERE ${PAYOUT_OF_REFERENCE} = $1`, [payoutId]);
    expect(states.get(payoutId)?.rail_reference).toBe(rows[0]?.rail_reference);
  });

  it("on SIGTERM a payout not yet submitted is given back, its lease released, and the executor exits 0", async () => {
    const payoutId = "po-drain-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-drain" }]);
    const e = await executor("exec-drain", { EXECUTOR_PAUSE_AFTER_FENCE_MS: "60000", DRAIN_MS: "500", LEASE_TTL_MS: "30000" });
    await eventually(async () => logEvents(e).find((l) => l.event === "fenced" && l.payout_id === payoutId), "the executor to fence", 15_000);
    const held = await lockClient(lock).inspect({ key: "account:acc-drain" });
    expect(held.held).toBe(true);
    started.splice(started.indexOf(e), 1);
    expect(await e.stop(15_000)).toBe(0);
    expect(logEvents(e).find((l) => l.event === "payout_attempt" && l.payout_id === payoutId)).toMatchObject({ outcome: "ABANDONED" });
    expect((await lockClient(lock).inspect({ key: "account:acc-drain" })).held).toBe(false);
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(0);
    // Given back, not stuck: the next executor pays it.
    await executor("exec-drain-next");
    const states = await waitTerminal([payoutId], 30_000);
    expect(states.get(payoutId)?.state).toBe("PAID");
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
  });

  it("a dead proxy replica costs a call, not a payment: the intent never committed, so it is paid later, once", async () => {
    const payoutId = "po-deadproxy-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-deadproxy" }]);
    // Port 9 (discard) on localhost: nothing listens, so every call there fails before sending.
    const e = await executor("exec-deadproxy", { RAIL_PROXY_URLS: `http://127.0.0.1:9,${mesh.proxies[0]!.url}`, CALL_TIMEOUT_MS: "1000" });
    const states = await waitTerminal([payoutId], 30_000);
    expect(states.get(payoutId)?.state).toBe("PAID");
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
    // The row is written before the attempt's log line: wait for the line, then read the last one.
    const attempts = await waitForLogs(
      e,
      (l) => l.event === "payout_attempt" && l.payout_id === payoutId,
      (lines) => lines.some((l) => l.outcome === "PAID"),
      "the PAID attempt",
    );
    expect(attempts.at(-1)?.outcome).toBe("PAID");
  });

  it("a fresh lease is not renewed: Acquire, fence, SubmitPayout, Release; one payment", async () => {
    const payoutId = "po-fresh-lease-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-fresh-lease" }]);
    // A long TTL: a fifth of it (4 s) is far beyond an uncontended acquire and fence.
    const e = await executor("exec-fresh-lease", { LEASE_TTL_MS: "20000" });
    expect((await waitTerminal([payoutId], 30_000)).get(payoutId)?.state).toBe("PAID");
    // The row is written before the attempt's log line: wait for the line.
    const attempt = await waitForLog(e, (l) => l.event === "payout_attempt" && l.payout_id === payoutId, "the attempt");
    // No "record" step: the proxy closed the payout with the rail's answer (decision 072).
    expect(Object.keys(attempt.steps_ms as object)).toEqual(["acquire", "fence", "submit"]);
    expect(attempt.closed_by).toBe("rail-proxy");
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
    // Released after the attempt ends, not before it (decision 074: the slot does not wait for it).
    await eventually(async () => !(await lockClient(lock).inspect({ key: "account:acc-fresh-lease" })).held, "the lease released", 5_000);
  });

  it("a lease that waited for the lock is renewed before submitting (a fifth of its TTL had passed)", async () => {
    const payoutId = "po-waited-lease-1";
    // The executor first (its start-up may take longer than the other lease under load), then
    // someone else holds the account for 1.5 s, then the payout: the executor's Acquire waits.
    const e = await executor("exec-waited-lease", { LEASE_TTL_MS: "2000", LOCK_WAIT_MS: "5000" });
    const other = await lockClient(lock).acquire({ key: "account:acc-waited-lease", owner: "test-holder", ttlMs: 1500, waitMs: 0 });
    expect(other.lease?.fencingToken).toBeGreaterThan(0n);
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-waited-lease" }]);
    expect((await waitTerminal([payoutId], 30_000)).get(payoutId)?.state).toBe("PAID");
    const attempt = await waitForLog(e, (l) => l.event === "payout_attempt" && l.payout_id === payoutId && l.outcome === "PAID", "the PAID attempt");
    expect(Object.keys(attempt.steps_ms as object)).toEqual(["acquire", "fence", "renew", "submit"]);
    expect((attempt.steps_ms as Record<string, number>).acquire).toBeGreaterThan(400);
    expect((await railPaymentCounts(raildb, [payoutId], "ANY")).get(payoutId)).toBe(1);
  });

  it("negative control: with the executor's log 1 s late, the attempt line is missing when the row is PAID; waiting for it finds it", async () => {
    const payoutId = "po-late-log-1";
    await insertPayouts(paydb, [{ payoutId, accountId: "acc-late-log" }]);
    const e = await executor("exec-late-log", {}, { logDelayMs: 1000 });
    expect((await waitTerminal([payoutId], 30_000)).get(payoutId)?.state).toBe("PAID");
    const isAttempt = (l: Record<string, unknown>) => l.event === "payout_attempt" && l.payout_id === payoutId;
    // What the tests above did before they waited for the line: read it right after the row.
    expect(logEvents(e).find(isAttempt)).toBeUndefined();
    expect(await waitForLog(e, isAttempt, "the attempt")).toMatchObject({ outcome: "PAID" });
  });
});
