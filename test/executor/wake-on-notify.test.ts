/**
 * Executors are told about new work (decision 069): paydb announces a payable payout (migration
 * 021) and an idle executor claims it at once, not at its next poll. Real processes, real
 * PostgreSQL. Every executor here polls every 600 s, so a payout paid within seconds was paid
 * because the executor was told.
 *
 * Control: the same executor with EXECUTOR_WAKE=poll (the design before 069) leaves the payout
 * PENDING. And the listener connection, killed by paydb itself, strands nothing: the executor
 * logs the outage once, reconnects, claims what was announced while it was deaf, and is told
 * again afterwards.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { eventually, metricValue } from "../support/clients.js";
import { quietFor } from "../support/time.js";
import { useMesh } from "../support/use-mesh.js";
import { insertPayouts, logEvents, payoutStates, startExecutor, waitForLog } from "./support.js";

/** Far beyond every wait below: no payout in this file is found by a poll. */
const POLL_INTERVAL_MS = "600000";

const t = useMesh({ proxies: 1 });
beforeAll(async () => {
  await t.mesh.startLock();
});
const started: ServiceProcess[] = [];
let seq = 0;

afterEach(async () => {
  const codes = await Promise.all(started.splice(0).map((p) => p.stop(15_000)));
  // A payout a failed test left payable would be the next test's executor's first claim.
  await t.paydb.query(
    "UPDATE payouts SET state = 'FAILED', failure_reason = 'left by an earlier test', claimed_by = NULL, claimed_until = NULL WHERE payout_id LIKE 'po-wake-%' AND state IN ('PENDING', 'PROCESSING')",
  );
  expect(codes.every((c) => c === 0)).toBe(true);
});

/** An executor that has finished its first claim pass (found nothing) and now only waits. */
async function idleExecutor(id: string, wake: "notify" | "poll"): Promise<ServiceProcess> {
  const e = await startExecutor(t.mesh, t.mesh.lock!, id, { LOG_LEVEL: "info", EXECUTOR_WAKE: wake, POLL_INTERVAL_MS });
  started.push(e);
  await eventually(
    async () => ((await metricValue(e.ready!.metricsPort, "railfence_executor_last_pass_timestamp_seconds")) ?? 0) > 0,
    `${id}'s first claim pass`,
  );
  if (wake === "notify") await waitForLog(e, (l) => l.event === "listener_connected", "its LISTEN connection", 20_000);
  return e;
}

async function newPayout(): Promise<string> {
  const payoutId = `po-wake-${++seq}`;
  await insertPayouts(t.paydb, [{ payoutId, accountId: `acc-wake-${seq}` }]);
  return payoutId;
}

async function paid(payoutId: string, within = 20_000): Promise<void> {
  await eventually(async () => (await payoutStates(t.paydb, [payoutId])).get(payoutId)?.state === "PAID", `${payoutId} to be PAID`, within);
}

describe("executors are told about payable payouts (decision 069)", () => {
  it("a payout created while executors idle is paid long before their next poll", async () => {
    const e = await idleExecutor("exec-wake-notify", "notify");
    const payoutId = await newPayout();
    await paid(payoutId);
    expect(await metricValue(e.ready!.metricsPort, "railfence_executor_wakeups_total", 'cause="notify"')).toBeGreaterThanOrEqual(1);
    expect(await metricValue(e.ready!.metricsPort, "railfence_executor_wakeups_total", 'cause="poll"')).toBeUndefined();
  });

  it("control: with EXECUTOR_WAKE=poll the same payout waits for the poll, still PENDING after 3 s", async () => {
    await idleExecutor("exec-wake-poll", "poll");
    const payoutId = await newPayout();
    await quietFor(3000, "an executor that only polls must not find the payout before its 600 s poll");
    expect((await payoutStates(t.paydb, [payoutId])).get(payoutId)?.state).toBe("PENDING");
  });

  it("the listener connection killed by paydb strands nothing: the outage is logged once, the executor reconnects and pays", async () => {
    const id = "exec-wake-dropped";
    const e = await idleExecutor(id, "notify");
    const { rows } = await t.paydb.query<{ killed: boolean }>(
      "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
      [`executor/${id}/listener`],
    );
    expect(rows).toEqual([{ killed: true }]);
    // Announced while the executor may well be deaf: found when it is back (or told, if it already is).
    const duringOutage = await newPayout();
    await waitForLog(e, (l) => l.event === "listener_lost", "the outage", 20_000);
    await paid(duringOutage);
    await eventually(() => logEvents(e).filter((l) => l.event === "listener_connected").length === 2, "the listener to reconnect");
    // The new connection is listening: the next payout is announced on it.
    await paid(await newPayout());
    expect(logEvents(e).filter((l) => l.event === "listener_lost")).toHaveLength(1);
  });
});
