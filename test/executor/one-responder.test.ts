/**
 * One executor answers each "payable" notification (decision 073). paydb delivers a notification
 * to every listening executor; before 073 each of them claimed, and all but one claimed nothing:
 * a commit for nothing per executor per notification. Real processes, real PostgreSQL; every
 * executor here polls every 600 s, so each payout paid was paid because an executor was told.
 * Told the payout's account (decision 075), the responder takes it without a claim.
 *
 * Counted from the executors' own metric (railfence_executor_claims_total{found="none"}, a claim
 * that found nothing). Control: EXECUTOR_ANSWER=all (decision 069's design) makes the idle
 * executor claim for nothing on every payout. And a responder that stops answering (SIGSTOP) loses
 * nothing: its share waits for the other executor's poll, which then pays it.
 */
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { eventually, metricValue } from "../support/clients.js";
import { useMesh } from "../support/use-mesh.js";
import { insertPayouts, payoutStates, startExecutor, waitForLog } from "./support.js";

const t = useMesh({ proxies: 1 });
/** Its own pool: six sessions held at once, more than the fixture's pool lends. */
let senderPool: pg.Pool;
beforeAll(async () => {
  await t.mesh.startLock();
  senderPool = new pg.Pool({ connectionString: t.mesh.dbUrl("paydb"), max: 6 });
});
afterAll(async () => {
  await senderPool?.end();
});
const started: ServiceProcess[] = [];
const sessions: pg.PoolClient[] = [];
let seq = 0;

afterEach(async () => {
  for (const e of started) e.resume();
  for (const s of sessions.splice(0)) s.release();
  const codes = await Promise.all(started.splice(0).map((p) => p.stop(15_000)));
  await t.paydb.query(
    "UPDATE payouts SET state = 'FAILED', failure_reason = 'left by an earlier test', claimed_by = NULL, claimed_until = NULL WHERE payout_id LIKE 'po-one-%' AND state IN ('PENDING', 'PROCESSING')",
  );
  expect(codes.every((c) => c === 0)).toBe(true);
});

/** Two notify executors, each idle after its first pass and each seeing both listeners. */
async function twoExecutors(answer: "one" | "all", pollIntervalMs = "600000"): Promise<ServiceProcess[]> {
  const env = { LOG_LEVEL: "info", EXECUTOR_ANSWER: answer, POLL_INTERVAL_MS: pollIntervalMs, EXECUTOR_PEERS_REFRESH_MS: "200" };
  const pair = [await startExecutor(t.mesh, t.mesh.lock!, `exec-one-${answer}-a`, env), await startExecutor(t.mesh, t.mesh.lock!, `exec-one-${answer}-b`, env)];
  started.push(...pair);
  for (const e of pair) {
    await waitForLog(e, (l) => l.event === "listener_connected", "its LISTEN connection", 20_000);
    await eventually(async () => ((await metricValue(e.ready!.metricsPort, "railfence_executor_last_pass_timestamp_seconds")) ?? 0) > 0, "a first claim pass");
    if (answer === "one") {
      await eventually(async () => (await metricValue(e.ready!.metricsPort, "railfence_executor_listening_executors")) === 2, "a view of both listeners");
    }
  }
  return pair;
}

/** A counter summed over both executors. */
const total = async (pair: ServiceProcess[], metric: string, labels: string) => {
  let n = 0;
  for (const e of pair) n += (await metricValue(e.ready!.metricsPort, metric, labels)) ?? 0;
  return n;
};

const emptyClaims = async (pair: ServiceProcess[]) => {
  let n = 0;
  for (const e of pair) n += (await metricValue(e.ready!.metricsPort, "railfence_executor_claims_total", 'found="none"')) ?? 0;
  return n;
};

/** Six paydb sessions: notifications from six senders, so both executors are someone's responder. */
async function senders(): Promise<pg.PoolClient[]> {
  for (let i = 0; i < 6; i++) sessions.push(await senderPool.connect());
  return sessions;
}

/** Creates payouts one at a time, round-robin over the senders, each paid before the next. */
async function payOneByOne(from: pg.PoolClient[], n: number, within = 20_000): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const payoutId = `po-one-${++seq}`;
    ids.push(payoutId);
    await insertPayouts(from[i % from.length]!, [{ payoutId, accountId: `acc-one-${seq}` }]);
    await eventually(async () => (await payoutStates(t.paydb, [payoutId])).get(payoutId)?.state === "PAID", `${payoutId} to be PAID`, within);
  }
  return ids;
}

describe("one executor answers each notification (decision 073)", () => {
  it("two idle executors, twelve payouts from six sessions: all paid without a poll, and no claim finds nothing", async () => {
    const pair = await twoExecutors("one");
    const from = await senders();
    const before = await emptyClaims(pair);
    await payOneByOne(from, 12);
    expect(await emptyClaims(pair)).toBe(before);
    // Decision 075: each notification named its account, and its responder, idle, took the
    // account's lock and then the payout in one statement: no claim found any of them.
    expect(await total(pair, "railfence_executor_fence_next_total", 'found="payout"')).toBe(12);
    expect(await total(pair, "railfence_executor_claims_total", 'found="payouts"')).toBe(0);
    // Both answered some (six senders over two executors): the work is shared, not given to one.
    const left = await Promise.all(pair.map((e) => metricValue(e.ready!.metricsPort, "railfence_executor_notifications_total", 'answer="left"')));
    expect(left.every((n) => (n ?? 0) > 0)).toBe(true);
  });

  it("control: with EXECUTOR_ANSWER=all the executor that loses each race claims for nothing", async () => {
    const pair = await twoExecutors("all");
    const from = await senders();
    const before = await emptyClaims(pair);
    await payOneByOne(from, 12);
    expect((await emptyClaims(pair)) - before).toBeGreaterThanOrEqual(12);
    // Every executor answering: no claim-and-fence (both would take the account's lock for one payout).
    expect(await total(pair, "railfence_executor_fence_next_total", 'found="payout"')).toBe(0);
  });

  it("a responder that stops answering (SIGSTOP) strands nothing: its share is paid by the other's poll", async () => {
    const pair = await twoExecutors("one", "1000");
    const from = await senders();
    pair[0]!.pause();
    // Six senders: about half of these notifications are the paused executor's to answer.
    const ids = await payOneByOne(from, 6, 30_000);
    const states = await payoutStates(t.paydb, ids);
    expect([...states.values()].every((r) => r.state === "PAID")).toBe(true);
    // Paid by the executor still running: its own share told (claim-and-fence), the paused one's found by its poll.
    const port = pair[1]!.ready!.metricsPort;
    const byPoll = (await metricValue(port, "railfence_executor_claims_total", 'found="payouts"')) ?? 0;
    const told = (await metricValue(port, "railfence_executor_fence_next_total", 'found="payout"')) ?? 0;
    expect(byPoll).toBeGreaterThanOrEqual(1);
    expect(byPoll + told).toBeGreaterThanOrEqual(6);
  });
});
