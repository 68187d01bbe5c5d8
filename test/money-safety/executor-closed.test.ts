/**
 * The executor writes nothing after an ACCEPTED answer that says the proxy closed the payout
 * (decision 072), and only then. Real executors, woken by paydb, paying through a real proxy:
 *
 * - as shipped: the payout is PAID and the PAID was written by the proxy's login, not the
 *   executor's (the executor's outcome commit is gone);
 * - a proxy from before decision 072 (mid-rollout; the harness's RAIL_PROXY_OUTCOME_ONLY): its
 *   answers never say payout_closed, so the executor writes PAID itself, as before;
 * - negative control: that same proxy with an executor that takes every ACCEPTED as closed
 *   (EXECUTOR_TRUST_ACCEPTED): the rail paid, the payout is left PROCESSING, and the audit names
 *   it (PAYOUT_OPEN). The same executor with a proxy that closes leaves nothing to find.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { runAudit } from "../../services/cli/audit/audit.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { insertPayouts, startExecutor, waitForLog } from "../executor/support.js";
import { useMesh } from "../support/use-mesh.js";

const t = useMesh({ proxies: 1 });
beforeAll(async () => {
  await t.mesh.startLock();
});
let seq = 0;
const started: ServiceProcess[] = [];

afterEach(async () => {
  for (const p of started.splice(0)) await p.stop();
});

/** A proxy (spare: no other executor uses it) and one executor paying through it alone. */
async function pair(proxyEnv: Record<string, string>, executorEnv: Record<string, string>) {
  const proxy = await t.mesh.startSpareProxy(`rail-proxy-closed-${++seq}`, proxyEnv);
  started.push(proxy);
  const executor = await startExecutor(t.mesh, t.mesh.lock!, `executor-closed-${seq}`, { RAIL_PROXY_URLS: proxy.url, ...executorEnv });
  started.unshift(executor);
  return executor;
}

/** A new payout, paid by `executor`: its attempt's log line. */
async function paidBy(executor: ServiceProcess) {
  const payoutId = `po-executor-closed-${seq}`;
  await insertPayouts(t.paydb, [{ payoutId, accountId: `acc-executor-closed-${seq}`, amountMinor: 2300n }]);
  const line = await waitForLog(executor, (e) => e.event === "payout_attempt" && e.payout_id === payoutId, `an attempt at ${payoutId}`);
  const { rows } = await t.paydb.query<{ state: string; rail_reference: string | null }>("SELECT state, rail_reference FROM payouts WHERE payout_id = $1", [
    payoutId,
  ]);
  const writers = await t.paydb.query<{ new_state: string; changed_by: string }>(
    "SELECT new_state, changed_by FROM payout_history WHERE payout_id = $1 AND new_state = 'PAID'",
    [payoutId],
  );
  return { payoutId, line, payout: rows[0]!, paidBy: writers.rows.map((r) => r.changed_by) };
}

async function violationsOf(payoutId: string): Promise<string[]> {
  const audit = await runAudit(t.roleDb("paydb", "auditor"), ledgerStatement(t.raildb), { quiescent: true });
  return audit.violations.filter((v) => JSON.stringify(v.row).includes(payoutId)).map((v) => v.invariant);
}

describe("the executor writes nothing after ACCEPTED only when the proxy closed the payout (decision 072)", () => {
  it("as shipped: PAID, written by the proxy's login alone; the executor's attempt says closed_by rail-proxy", async () => {
    const executor = await pair({}, {});
    const r = await paidBy(executor);
    expect(r.line.outcome).toBe("PAID");
    expect(r.line.closed_by).toBe("rail-proxy");
    expect(r.payout.state).toBe("PAID");
    expect(r.paidBy).toHaveLength(1);
    expect(r.paidBy[0]).toMatch(/rail_proxy/);
    expect(await violationsOf(r.payoutId)).toEqual([]);
  });

  it("a proxy from before decision 072 (answers never say payout_closed): the executor writes PAID itself", async () => {
    const executor = await pair({ RAIL_PROXY_OUTCOME_ONLY: "true" }, {});
    const r = await paidBy(executor);
    expect(r.line.outcome).toBe("PAID");
    expect(r.line.closed_by).toBeUndefined();
    expect(r.payout.state).toBe("PAID");
    expect(r.paidBy).toHaveLength(1);
    expect(r.paidBy[0]).toMatch(/executor/);
    expect(await violationsOf(r.payoutId)).toEqual([]);
  });

  it("negative control: an executor taking every ACCEPTED as closed, with that proxy, leaves a paid payout PROCESSING, and the audit names it", async () => {
    const executor = await pair({ RAIL_PROXY_OUTCOME_ONLY: "true" }, { EXECUTOR_TRUST_ACCEPTED: "true" });
    const r = await paidBy(executor);
    expect(r.line.outcome).toBe("PAID");
    expect(r.payout.state).toBe("PROCESSING");
    expect(r.paidBy).toEqual([]);
    await executor.stop();
    expect(await violationsOf(r.payoutId)).toContain("PAYOUT_OPEN");
  });

  it("the same executor with a proxy that closes: PAID, nothing for the audit", async () => {
    const executor = await pair({}, { EXECUTOR_TRUST_ACCEPTED: "true" });
    const r = await paidBy(executor);
    expect(r.payout.state).toBe("PAID");
    expect(await violationsOf(r.payoutId)).toEqual([]);
  });
});
