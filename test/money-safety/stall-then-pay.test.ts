/**
 * A proxy frozen between admission and the rail call must never pay a payout that was closed
 * NOT_PAID meanwhile (issue: "a frozen proxy pays a payout that was already closed").
 *
 * The reproduction, against real processes: hold the account's rail_high_water row so proxy 1's
 * admission blocks inside PostgreSQL; SIGSTOP proxy 1; release the row (the intent commits as
 * FORWARDING); proxy 2's sweeper makes it ambiguous; the reconciler resolves it NOT_PAID and the
 * payout becomes FAILED; SIGCONT proxy 1.
 *
 * - Guarded (the pre-forward budget): proxy 1 sees that more than its budget passed since it sent
 *   the admission statement, does not call the rail, and says NOT_FORWARDED. Nothing is paid.
 * - Negative control (RAIL_PROXY_DISABLED_GUARDS=forward-budget): the rail books the payment. The
 *   late answer is recorded on the ledger, counted, and the payout is flagged for a human; the
 *   proxy answers the ledger's row, never an invented one.
 * - The send gate alone (RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE): a stall after the first budget
 *   check, before the gate asks again; the gate refuses (NOT_FORWARDED). Its negative control
 *   (RAIL_PROXY_DISABLED_GUARDS=send-gate): the same stall is paid after NOT_PAID.
 * - A pause the monotonic clock did not see (the send-gate hold with
 *   RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC, as a VM pause hidden from the guest): the budget's
 *   monotonic count says no time passed; paydb's forward deadline, read on the wall clock, refuses
 *   it (NOT_FORWARDED). Its negative control (RAIL_PROXY_DISABLED_GUARDS=wall-clock): paid after
 *   NOT_PAID, and seen (sent late by the wall clock, late answer, flagged).
 * - The residual window (RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE): a stall after the last budget
 *   check, before the request is written, is not prevented, and this test shows it: the rail books
 *   the payment after the NOT_PAID verdict. What it must be is seen: the proxy logs the request
 *   sent past its budget and counts it, the late answer is recorded and the payout flagged.
 */
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fencedByExecutor } from "../support/fenced-payout.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { eventually, metricValue, proxyClient } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, poolFor, waitForLog } from "../executor/support.js";
import { quietFor } from "../support/time.js";

const RAIL_DEADLINE_MS = 1000;
const AMBIGUITY_MARGIN_MS = 1000;
const ADMISSION_TIMEOUT_MS = 4000;
/** Strictly above 2 x deadline + margin + admission timeout, as the reconciler's config requires. */
const SETTLEMENT_WINDOW_MS = 2 * RAIL_DEADLINE_MS + AMBIGUITY_MARGIN_MS + ADMISSION_TIMEOUT_MS + 500;

let mesh: Mesh;
/** Replica 4 stalls after its budget check until this file exists. */
const releaseFile = join(tmpdir(), `railfence-release-${process.pid}-${Date.now()}`);
/** Replicas 5 and 6 stall after the first budget check, before the send gate, until these exist. */
const gateReleaseFile = join(tmpdir(), `railfence-release-gate-${process.pid}-${Date.now()}`);
const noGateReleaseFile = join(tmpdir(), `railfence-release-nogate-${process.pid}-${Date.now()}`);
/** Replicas 7 and 8 stall before the send gate, hidden from their monotonic clocks, until these exist. */
const hiddenReleaseFile = join(tmpdir(), `railfence-release-hidden-${process.pid}-${Date.now()}`);
const hiddenNoWallReleaseFile = join(tmpdir(), `railfence-release-hidden-nowall-${process.pid}-${Date.now()}`);
let paydb: pg.Pool;
let raildb: pg.Pool;

beforeAll(async () => {
  mesh = testMesh({
    proxies: 2,
    proxyEnv: {
      RAIL_DEADLINE_MS: String(RAIL_DEADLINE_MS),
      AMBIGUITY_MARGIN_MS: String(AMBIGUITY_MARGIN_MS),
      ADMISSION_TIMEOUT_MS: String(ADMISSION_TIMEOUT_MS),
      RAIL_FORWARD_BUDGET_MS: "500",
      SWEEP_INTERVAL_MS: "200",
    },
  });
  await mesh.start();
  // Replica 3: the same proxy without the pre-forward budget (the negative control).
  await mesh.addProxy({ RAIL_PROXY_DISABLED_GUARDS: "forward-budget" });
  // Replica 4: every guard on, and a stall planted in the residual window.
  await mesh.addProxy({ RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE: releaseFile });
  // Replica 5: every guard on, a stall planted before the send gate (what the gate alone catches).
  await mesh.addProxy({ RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: gateReleaseFile });
  // Replica 6: the same stall with the send gate removed (its negative control).
  await mesh.addProxy({ RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: noGateReleaseFile, RAIL_PROXY_DISABLED_GUARDS: "send-gate" });
  // Replica 7: every guard on, the stall before the send gate hidden from the monotonic clock.
  await mesh.addProxy({ RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: hiddenReleaseFile, RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC: "true" });
  // Replica 8: the same with the wall-clock guard removed (its negative control).
  await mesh.addProxy({
    RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: hiddenNoWallReleaseFile,
    RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC: "true",
    RAIL_PROXY_DISABLED_GUARDS: "wall-clock",
  });
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
});

afterAll(async () => {
  writeFileSync(releaseFile, "");
  writeFileSync(gateReleaseFile, "");
  writeFileSync(noGateReleaseFile, "");
  writeFileSync(hiddenReleaseFile, "");
  writeFileSync(hiddenNoWallReleaseFile, "");
  for (const p of mesh?.proxies ?? []) p.resume();
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
  rmSync(releaseFile, { force: true });
  rmSync(gateReleaseFile, { force: true });
  rmSync(noGateReleaseFile, { force: true });
  rmSync(hiddenReleaseFile, { force: true });
  rmSync(hiddenNoWallReleaseFile, { force: true });
});

/** A payout fenced by an executor holding `token` (what an honest executor does before submitting). */
async function fencedPayout(payoutId: string, accountId: string, token: bigint): Promise<void> {
  await insertPayouts(paydb, [{ payoutId, accountId, amountMinor: 4200n, beneficiary: "ben-stall" }]);
  await fencedByExecutor(paydb, payoutId, token);
  // An earlier admission left a mark for the account: its row is what the blocker holds.
  await paydb.query("INSERT INTO rail_high_water (account_id, mark) VALUES ($1, 1)", [accountId]);
}

async function submissionState(payoutId: string): Promise<string | undefined> {
  const { rows } = await paydb.query<{ state: string }>("SELECT state FROM rail_submissions WHERE payout_id = $1", [payoutId]);
  return rows[0]?.state;
}

/** The payout's state and why it needs a human, if it does. */
async function attentionOf(payoutId: string): Promise<{ state: string; attention_reason: string | null } | undefined> {
  const { rows } = await paydb.query<{ state: string; attention_reason: string | null }>("SELECT state, attention_reason FROM payouts WHERE payout_id = $1", [
    payoutId,
  ]);
  return rows[0];
}

async function railPayments(payoutId: string): Promise<number> {
  const { rows } = await raildb.query<{ n: number }>("SELECT count(*)::int AS n FROM payments WHERE client_reference = $1 AND status = 'ACCEPTED'", [payoutId]);
  return rows[0]!.n;
}

/**
 * Plays the whole reproduction against `stalled` and returns the proxy's answer to the stalled
 * SubmitPayout once it is resumed (after the payout was closed NOT_PAID).
 */
async function stallThroughResolution(stalled: ServiceProcess, payoutId: string, accountId: string) {
  const token = 7n;
  await fencedPayout(payoutId, accountId, token);
  const blocker = await paydb.connect();
  let answer: Promise<{ ok?: unknown; err?: ConnectError }>;
  try {
    await blocker.query("BEGIN");
    await blocker.query("SELECT mark FROM rail_high_water WHERE account_id = $1 FOR UPDATE", [accountId]);
    answer = proxyClient(stalled.url)
      .submitPayout(
        { accountId, payoutId, fencingToken: token, amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-stall" },
        { timeoutMs: 60_000 },
      )
      .then(
        (ok) => ({ ok }),
        (err: unknown) => ({ err: ConnectError.from(err) }),
      );
    // The admission statement is inside PostgreSQL, waiting for the row lock.
    await eventually(async () => {
      const { rows } = await paydb.query("SELECT 1 FROM pg_stat_activity WHERE application_name LIKE $1 AND wait_event_type = 'Lock'", [
        `rail-proxy/${stalled.opts.env.REPLICA_ID}%`,
      ]);
      return rows.length > 0;
    }, "the admission to wait on the row lock");
    stalled.pause();
    await blocker.query("COMMIT");
  } finally {
    blocker.release();
  }
  await resolveNotPaid(payoutId);
  stalled.resume();
  const result = await answer;
  await quietFor(RAIL_DEADLINE_MS + 500, "whatever it did, a rail call would have landed by now");
  return result;
}

/** While its proxy is frozen: replica 2's sweeper makes the intent ambiguous, the reconciler closes it NOT_PAID. */
async function resolveNotPaid(payoutId: string): Promise<void> {
  await eventually(async () => (await submissionState(payoutId)) === "TIMEOUT", "the sweeper to declare the frozen intent ambiguous");
  // The reconciler closes it NOT_PAID once the settlement window has passed (read through replica 2).
  const reconcilerEnv = {
    RAIL_PROXY_URLS: mesh.proxies[1]!.url,
    SETTLEMENT_WINDOW_MS: String(SETTLEMENT_WINDOW_MS),
    RAIL_DEADLINE_MS: String(RAIL_DEADLINE_MS),
    AMBIGUITY_MARGIN_MS: String(AMBIGUITY_MARGIN_MS),
    ADMISSION_TIMEOUT_MS: String(ADMISSION_TIMEOUT_MS),
  };
  await eventually(
    async () => {
      const run = await mesh.reconcileOnce(reconcilerEnv);
      expect(run.code, run.lines.slice(-5).join("\n")).toBe(0);
      return (await submissionState(payoutId)) === "RESOLVED_NOT_PAID";
    },
    "the reconciler to resolve the ambiguous intent NOT_PAID",
    SETTLEMENT_WINDOW_MS + 20_000,
  );
  const { rows } = await paydb.query<{ state: string }>("SELECT state FROM payouts WHERE payout_id = $1", [payoutId]);
  expect(rows[0]!.state).toBe("FAILED");
}

describe("a proxy frozen between admission and the rail call", () => {
  it("does not call the rail once its pre-forward budget has passed: nothing is paid after NOT_PAID", async () => {
    const payoutId = "po-stall-guarded";
    const result = await stallThroughResolution(mesh.proxies[0]!, payoutId, "acc-stall-guarded");
    expect(await railPayments(payoutId)).toBe(0);
    expect(result.err, "the stalled submission must be refused").toBeDefined();
    expect(Code[result.err!.code]).toBe("Aborted");
    expect(errorReason(result.err!)).toBe("NOT_FORWARDED");
    // The ledger keeps the resolution; the payout stays FAILED.
    expect(await submissionState(payoutId)).toBe("RESOLVED_NOT_PAID");
    expect(await metricValue(mesh.proxies[0]!.ready!.metricsPort, "railfence_rail_proxy_requests_sent_late_total")).toBe(0);
  });

  it("negative control: without the budget the rail books it, and the late answer is recorded, counted and flagged", async () => {
    const payoutId = "po-stall-unguarded";
    const unguarded = mesh.proxies[2]!;
    const result = await stallThroughResolution(unguarded, payoutId, "acc-stall-unguarded");
    expect(await railPayments(payoutId)).toBe(1);
    // The proxy answers what the ledger holds: the resolved row, with the late answer on it.
    expect(result.ok, result.err?.message).toBeDefined();
    const submission = (result.ok as { submission?: { state: SubmissionState; lateAnswer?: { state: SubmissionState; railReference: string } } }).submission;
    expect(submission?.state).toBe(SubmissionState.RESOLVED_NOT_PAID);
    expect(submission?.lateAnswer?.state).toBe(SubmissionState.ACCEPTED);
    const { rows: ledger } = await paydb.query<{ late_answer_state: string; late_rail_reference: string }>(
      "SELECT late_answer_state, late_rail_reference FROM rail_submissions WHERE payout_id = $1",
      [payoutId],
    );
    expect(ledger[0]).toMatchObject({ late_answer_state: "ACCEPTED" });
    expect(ledger[0]!.late_rail_reference).toMatch(/^rr_/);
    expect(await attentionOf(payoutId)).toEqual({ state: "NEEDS_ATTENTION", attention_reason: "LATE_RAIL_ANSWER" });
    expect(await metricValue(unguarded.ready!.metricsPort, "railfence_rail_proxy_late_answers_total", 'previous_state="resolved_not_paid"')).toBe(1);
    await waitForLog(unguarded, (l) => l.event === "rail_late_answer" && l.level === "error", "the late answer at error");
  });

  /**
   * A submission to a replica whose thread a planted hold stops (before the send gate, or after
   * the last budget check) until the intent is resolved NOT_PAID; then the hold is released and
   * the proxy's answer returned, after giving a rail call time to land.
   */
  async function heldThroughNotPaid(replica: ServiceProcess, file: string, payoutId: string, accountId: string) {
    await fencedPayout(payoutId, accountId, 7n);
    const answer = proxyClient(replica.url)
      .submitPayout({ accountId, payoutId, fencingToken: 7n, amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-stall" }, { timeoutMs: 60_000 })
      .then(
        (ok) => ({ ok, err: undefined }),
        (err: unknown) => ({ ok: undefined, err: ConnectError.from(err) }),
      );
    await eventually(async () => (await submissionState(payoutId)) === "FORWARDING", "the intent to commit");
    await resolveNotPaid(payoutId);
    expect(await railPayments(payoutId), "nothing left the frozen process").toBe(0);
    writeFileSync(file, "");
    const result = await answer;
    await quietFor(RAIL_DEADLINE_MS + 500, "whatever it did, a rail call would have landed by now");
    return result;
  }

  it("a stall after the first budget check, before the write: the send gate alone refuses it, nothing is paid after NOT_PAID", async () => {
    const payoutId = "po-stall-gate";
    const result = await heldThroughNotPaid(mesh.proxies[4]!, gateReleaseFile, payoutId, "acc-stall-gate");
    expect(errorReason(result.err), result.err?.message).toBe("NOT_FORWARDED");
    expect(await railPayments(payoutId)).toBe(0);
    expect(await submissionState(payoutId)).toBe("RESOLVED_NOT_PAID");
  }, 90_000);

  it("negative control: the same stall with the send gate removed is paid after NOT_PAID (late answer, flagged)", async () => {
    const payoutId = "po-stall-nogate";
    const result = await heldThroughNotPaid(mesh.proxies[5]!, noGateReleaseFile, payoutId, "acc-stall-nogate");
    expect(result.ok, result.err?.message).toBeDefined();
    expect(await railPayments(payoutId)).toBe(1);
    expect(await attentionOf(payoutId)).toEqual({ state: "NEEDS_ATTENTION", attention_reason: "LATE_RAIL_ANSWER" });
  }, 90_000);

  it("a pause hidden from the monotonic clock (a VM pause): paydb's deadline on the wall clock refuses it, nothing is paid after NOT_PAID", async () => {
    const payoutId = "po-stall-hidden";
    const held = mesh.proxies[6]!;
    const result = await heldThroughNotPaid(held, hiddenReleaseFile, payoutId, "acc-stall-hidden");
    expect(errorReason(result.err), result.err?.message).toBe("NOT_FORWARDED");
    expect(await railPayments(payoutId)).toBe(0);
    expect(await submissionState(payoutId)).toBe("RESOLVED_NOT_PAID");
    expect(await metricValue(held.ready!.metricsPort, "railfence_rail_proxy_requests_sent_late_total")).toBe(0);
  }, 90_000);

  it("negative control: the same hidden pause with the wall-clock guard removed is paid after NOT_PAID, and seen (sent late, flagged)", async () => {
    const payoutId = "po-stall-hidden-nowall";
    const held = mesh.proxies[7]!;
    const result = await heldThroughNotPaid(held, hiddenNoWallReleaseFile, payoutId, "acc-stall-hidden-nowall");
    expect(result.ok, result.err?.message).toBeDefined();
    expect(await railPayments(payoutId)).toBe(1);
    expect(await attentionOf(payoutId)).toEqual({ state: "NEEDS_ATTENTION", attention_reason: "LATE_RAIL_ANSWER" });
    // The monotonic clock saw nothing; the wall clock did, so the write is seen as late.
    const sentLate = await waitForLog(held, (l) => l.event === "rail_request_sent_late", "the request sent late");
    expect(sentLate.sent_delay_ms).toBeGreaterThan(SETTLEMENT_WINDOW_MS);
  }, 90_000);

  it("a stall after the last budget check (the residual window) is not prevented, and is seen: sent late, late answer, flagged", async () => {
    const payoutId = "po-stall-residual";
    const accountId = "acc-stall-residual";
    const held = mesh.proxies[3]!;
    // Admitted within budget; the thread then stops before the request is written.
    const result = await heldThroughNotPaid(held, releaseFile, payoutId, accountId);
    expect(result.ok, result.err?.message).toBeDefined();
    expect(await railPayments(payoutId), "the residual window: the rail books it after the NOT_PAID verdict").toBe(1);
    const submission = result.ok!.submission!;
    expect(submission.state).toBe(SubmissionState.RESOLVED_NOT_PAID);
    expect(submission.lateAnswer?.state).toBe(SubmissionState.ACCEPTED);
    expect(await attentionOf(payoutId)).toEqual({ state: "NEEDS_ATTENTION", attention_reason: "LATE_RAIL_ANSWER" });
    expect(await metricValue(held.ready!.metricsPort, "railfence_rail_proxy_requests_sent_late_total")).toBe(1);
    const sentLate = await waitForLog(held, (l) => l.event === "rail_request_sent_late", "the request sent late");
    expect(sentLate).toMatchObject({ level: "error", payout_id: payoutId, budget_ms: 500 });
    expect(sentLate.sent_delay_ms).toBeGreaterThan(SETTLEMENT_WINDOW_MS);
  }, 90_000);
});
