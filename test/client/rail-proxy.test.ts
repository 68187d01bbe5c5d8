/**
 * The library's rail-proxy calls against a real mesh (two proxy replicas, the rail stub, paydb):
 * reads are retried and move on to the next replica; SubmitPayout — no duplicate protection —
 * is sent exactly once, and an unknown outcome (lost answer, RAIL_AMBIGUOUS) is reported with a
 * status check instead of a retry. The rail's own ledger is the judge.
 */
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { createRailfenceClient, OutcomeUnknownError, RailfenceError, SubmissionState, type RailfenceClient } from "../../clients/typescript/src/index.js";
import { db, eventually, FaultKind, metricValue, railBookings, railControl } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";

let mesh: Mesh;
let raildb: pg.Client;
let paydb: pg.Client;
let rf: RailfenceClient;

beforeAll(async () => {
  // A margin of 1 s: a pre-forward budget (half of it) a loaded machine's admission fits in.
  mesh = testMesh({ proxies: 2, proxyEnv: { RAIL_DEADLINE_MS: "700", AMBIGUITY_MARGIN_MS: "1000", SWEEP_INTERVAL_MS: "200" } });
  await mesh.start();
  await mesh.startPayouts();
  raildb = await db(mesh.dbUrl("raildb"));
  paydb = await db(mesh.dbUrl("paydb"));
  rf = createRailfenceClient({
    payoutsUrl: mesh.payouts!.url,
    railProxyUrls: mesh.proxies.map((p) => p.url),
    deadlineMs: 15_000,
    retry: { baseDelayMs: 50, maxDelayMs: 300, budget: false },
  });
});

afterAll(async () => {
  rf?.close();
  await raildb?.end();
  await paydb?.end();
  await mesh?.stop();
});

let n = 0;
/** A payout as an executor would hold it: created through the API, PROCESSING under fence = token. */
async function payableSubmission(token: bigint) {
  n++;
  const accountId = `acct-rp-${n}-${Date.now()}`;
  const { payout } = await rf.payouts.create({ accountId, amount: { amountMinor: 2500n, currency: "GBP" }, beneficiary: "ben-rp" });
  await paydb.query("UPDATE payouts SET state = 'PROCESSING', fence = $2 WHERE payout_id = $1", [payout.payoutId, token.toString()]);
  return { accountId, payoutId: payout.payoutId, fencingToken: token, amount: { amountMinor: 2500n, currency: "GBP" }, beneficiary: "ben-rp" };
}

const duplicates = async () => {
  let total = 0;
  for (const p of mesh.proxies) total += (await metricValue(p.ready!.metricsPort, "railfence_rail_proxy_duplicate_attempted_total")) ?? 0;
  return total;
};

describe("SubmitPayout (no duplicate protection)", () => {
  it("a lost answer is not retried on the other replica: OutcomeUnknownError after one attempt, and checkStatus() tells what happened", async () => {
    const sub = await payableSubmission(7n);
    const admittedBefore = (await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_admitted_total")) ?? 0;
    mesh.proxies[0]!.pause(); // the request reaches replica 1's socket; its answer cannot come back in time
    let err: unknown;
    try {
      await rf.railProxy.submitPayout(sub, { timeoutMs: 500 });
    } catch (e) {
      err = e;
    } finally {
      mesh.proxies[0]!.resume(); // ... and replica 1 then processes it
    }
    expect(err).toBeInstanceOf(OutcomeUnknownError);
    const unknown = err as OutcomeUnknownError;
    expect(unknown.attempts).toBe(1);
    expect(unknown.code).toBe(Code.DeadlineExceeded);
    expect(unknown.endpoint).toBe(mesh.proxies[0]!.url);
    // Replica 2 never saw it: a retry there is exactly what must not happen.
    expect((await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_admitted_total")) ?? 0).toBe(admittedBefore);

    const status = await eventually(async () => {
      const s = await (unknown.checkStatus() as Promise<{ state: SubmissionState }>).catch(() => undefined);
      return s && s.state === SubmissionState.ACCEPTED ? s : undefined;
    }, "the paused replica to finish the submission");
    expect(status.state).toBe(SubmissionState.ACCEPTED);
    expect(await railBookings(raildb, sub.payoutId)).toBe(1);
    expect(await duplicates()).toBe(0);
  });

  it("RAIL_AMBIGUOUS is an unknown outcome too: one rail call, status TIMEOUT (ambiguous) for the reconciler", async () => {
    const sub = await payableSubmission(3n);
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, count: 1, clientReferencePrefix: sub.payoutId }] });
    const err = await rf.railProxy.submitPayout(sub).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OutcomeUnknownError);
    expect((err as OutcomeUnknownError).reason).toBe("RAIL_AMBIGUOUS");
    expect((err as OutcomeUnknownError).attempts).toBe(1);
    const status = (await (err as OutcomeUnknownError).checkStatus()) as { state: SubmissionState; ambiguous: boolean };
    expect(status).toMatchObject({ state: SubmissionState.TIMEOUT, ambiguous: true });
    expect(await railBookings(raildb, sub.payoutId)).toBe(1);
    expect(await duplicates()).toBe(0);
  });

  it("a definite refusal (FENCED_OUT) is a plain RailfenceError, not retried", async () => {
    const sub = await payableSubmission(5n);
    await rf.railProxy.submitPayout(sub);
    const stale = await payableSubmission(4n);
    const err = await rf.railProxy.submitPayout({ ...stale, accountId: sub.accountId }).catch((e: unknown) => e as RailfenceError);
    expect(err).toBeInstanceOf(RailfenceError);
    expect(err).not.toBeInstanceOf(OutcomeUnknownError);
    expect(err).toMatchObject({ code: Code.Aborted, attempts: 1, transient: false });
    expect(await railBookings(raildb, stale.payoutId)).toBe(0);
  });
});

describe("rail-proxy reads", () => {
  it("move on to the next replica when one is down, and report NOT_FOUND as final", async () => {
    const sub = await payableSubmission(9n);
    await rf.railProxy.submitPayout(sub);
    mesh.proxies[0]!.kill("SIGKILL");
    await mesh.proxies[0]!.waitExit();
    try {
      for (let i = 0; i < 3; i++) expect((await rf.railProxy.getSubmission(sub.payoutId)).state).toBe(SubmissionState.ACCEPTED);
      expect((await rf.railProxy.listUnresolved()).submissions.every((s) => s.ambiguous)).toBe(true);
      const all = await rf.railProxy.listPayoutSubmissions(sub.payoutId);
      expect(all.map((s) => [s.payoutId, s.state])).toEqual([[sub.payoutId, SubmissionState.ACCEPTED]]);
      expect(await rf.railProxy.listPayoutSubmissions("po-never-admitted")).toEqual([]);
      const statement = await rf.railProxy.getRailStatement({ pageSize: 1000 });
      expect(statement.payments.some((p) => p.clientReference === sub.payoutId)).toBe(true);
      const missing = await rf.railProxy.getSubmission("po-never-admitted").catch((e: unknown) => e as RailfenceError);
      expect(missing).toMatchObject({ code: Code.NotFound, reason: "SUBMISSION_NOT_FOUND", transient: false });
    } finally {
      await mesh.proxies[0]!.restart();
    }
  });
});
