/**
 * The fence's ordering rules, fast, with a fake ledger and a fake rail (the cross-process tests in
 * test/rail-proxy and test/money-safety run the same rules against real PostgreSQL and a real
 * rail): the intent is recorded before the rail is called, the rail is called at most once and
 * never retried, nothing is forwarded past the pre-forward budget, and the answer is always what
 * the ledger holds.
 */
import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { pino } from "pino";
import { PaymentStatus } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import type { RailStatusReading } from "../shared/domain/rail-status.js";
import { SEND_GATE } from "../shared/rpc/send-gate.js";
import { createAdmission, type Guards } from "./admission.js";
import { createProxyMetrics } from "./proxy-metrics.js";
import type { RailClient } from "./rail-client.js";
import type { AdmitResult, Intent, SubmissionRow, SubmissionStore } from "./submission-store.js";

const intent: Intent = {
  reference: "po-1",
  payoutId: "po-1",
  accountId: "acc-1",
  token: 5n,
  amountMinor: 100n,
  currency: "EUR",
  beneficiary: "ben-1",
  replicaId: "r1",
};
const row = (state: SubmissionRow["state"], over: Partial<SubmissionRow> = {}) =>
  ({ payout_id: "po-1", bound_payout_id: "po-1", state, ...over }) as SubmissionRow;
const ALL: Guards = {
  forwardBudgetMs: 100,
  connectedSession: true,
  sendGate: true,
  wallClock: true,
  clockSkewAllowanceMs: 10,
};
/** The wall clock's epoch at the fake's monotonic zero. */
const EPOCH = 1_800_000_000_000;

/** A ledger and a rail that record what was asked of them, in order. */
function world(
  opts: {
    admit?: AdmitResult | Error;
    admitTakesMs?: number;
    /** Group admission: time this intent waits for its group's statement to leave (before `sent`). */
    queuedMs?: number;
    rail?: "accept" | "reject" | Error | { status: number };
    recorded?: SubmissionRow | undefined | Error;
    late?: SubmissionRow | undefined;
    /** Time the client spends between the call and the gate (interceptors, encoding). */
    beforeGateMs?: number;
    /** Time between the gate and the request reaching the socket (a stall there: the residual window). */
    afterGateMs?: number;
    /** A pause before the gate that the wall clock sees and the monotonic clock does not (a VM pause). */
    hiddenBeforeGateMs?: number;
    /** How far paydb's clock is ahead of this host's. */
    paydbAheadMs?: number;
  } = {},
) {
  const calls: string[] = [];
  let clock = 0;
  let wallOnly = 0;
  const store = {
    async admit(_i: Intent, sent?: () => void) {
      calls.push("admit");
      clock += opts.queuedMs ?? 0;
      sent?.();
      const admittedAtMs = EPOCH + clock + (opts.paydbAheadMs ?? 0);
      clock += opts.admitTakesMs ?? 1;
      if (opts.admit instanceof Error) throw opts.admit;
      return opts.admit ?? { kind: "ADMITTED", admittedAtMs };
    },
    async recordOutcome(_ref: string, state: string) {
      calls.push(`record:${state}`);
      if (opts.recorded instanceof Error) throw opts.recorded;
      return "recorded" in opts ? opts.recorded : row(state as SubmissionRow["state"]);
    },
    async recordLateAnswer(_ref: string, state: string) {
      calls.push(`late:${state}`);
      return opts.late;
    },
    async markNotForwarded() {
      calls.push("not-forwarded");
      return row("NOT_FORWARDED");
    },
    async get() {
      calls.push("get");
      return row("RESOLVED_NOT_PAID");
    },
  } as unknown as SubmissionStore;
  const rail = {
    async submitPayment(_req: unknown, options?: { contextValues?: ContextValues }) {
      // As the direct transport does: the gate decides at the last moment, then the write.
      const gate = options?.contextValues?.get(SEND_GATE);
      clock += opts.beforeGateMs ?? 0;
      wallOnly += opts.hiddenBeforeGateMs ?? 0;
      const refusal = gate?.beforeSend();
      if (refusal !== undefined) {
        calls.push("gate-refused");
        throw new ConnectError(refusal, Code.Aborted);
      }
      clock += opts.afterGateMs ?? 0;
      gate?.sent();
      calls.push("rail");
      const r = opts.rail ?? "accept";
      if (r instanceof Error) throw r;
      if (typeof r === "object") return { railReference: "rr_1", status: r.status, reason: "" };
      return { railReference: "rr_1", status: r === "accept" ? PaymentStatus.ACCEPTED : PaymentStatus.REJECTED, reason: r === "accept" ? "" : "NO" };
    },
  } as unknown as RailClient;
  const metrics = createProxyMetrics(new Registry());
  return { calls, store, rail, metrics, now: () => clock, wallNow: () => EPOCH + clock + wallOnly };
}

function admission(
  w: ReturnType<typeof world>,
  guards: Guards = ALL,
  markPrecheck?: (a: string, t: bigint) => boolean,
  readStatus?: (status: number) => RailStatusReading,
) {
  return createAdmission({
    ...(readStatus ? { readStatus } : {}),
    store: w.store,
    rail: w.rail,
    metrics: w.metrics,
    logger: pino({ level: "silent" }),
    guards,
    railDeadlineMs: 1000,
    now: w.now,
    wallNow: w.wallNow,
    markPrecheck,
  });
}

describe("admission, with a fake ledger and a fake rail", () => {
  it("records the intent before calling the rail, calls it once, and answers the ledger's row", async () => {
    const w = world();
    const out = await admission(w)(intent);
    expect(w.calls).toEqual(["admit", "rail", "record:ACCEPTED"]);
    expect(out).toMatchObject({ kind: "ANSWERED", row: { state: "ACCEPTED" } });
  });

  it("with group admission the budget counts from the group statement's send: time queued before it is not counted, time after it is", async () => {
    // Queued longer than the budget while the previous group was in paydb: nothing was written
    // yet, the sweeper's clock (created_at) has not started; forwarded.
    const queued = world({ queuedMs: 500, admitTakesMs: 5 });
    expect(await admission(queued)(intent)).toMatchObject({ kind: "ANSWERED", row: { state: "ACCEPTED" } });
    expect(queued.calls).toEqual(["admit", "rail", "record:ACCEPTED"]);
    // The group's statement itself took longer than the budget: not forwarded, however short the queue.
    const slow = world({ queuedMs: 0, admitTakesMs: 150 });
    expect(await admission(slow)(intent)).toMatchObject({ kind: "NOT_FORWARDED" });
    expect(slow.calls).toEqual(["admit", "not-forwarded"]);
  });

  it.each<AdmitResult>([
    { kind: "FENCED_OUT" },
    { kind: "DUPLICATE" },
    { kind: "PAYOUT_NOT_FOUND" },
    { kind: "PAYOUT_ALREADY_SUBMITTED", live: "po-1:t3" },
    { kind: "PAYOUT_MISMATCH", field: "amount_minor" },
  ])("a refused admission (%o) never reaches the rail", async (refusal) => {
    const w = world({ admit: refusal });
    expect(await admission(w)(intent)).toEqual({ kind: "REFUSED", refusal });
    expect(w.calls).toEqual(["admit"]);
  });

  it("paydb down: nothing is forwarded", async () => {
    const w = world({ admit: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
    expect((await admission(w)(intent)).kind).toBe("PAYDB_UNAVAILABLE");
    expect(w.calls).toEqual(["admit"]);
  });

  it("a lost rail answer is recorded TIMEOUT and never retried", async () => {
    const w = world({ rail: new ConnectError("deadline", Code.DeadlineExceeded) });
    expect(await admission(w)(intent)).toEqual({ kind: "AMBIGUOUS", cause: "RAIL_DEADLINE" });
    expect(w.calls).toEqual(["admit", "rail", "record:TIMEOUT"]);
  });

  it.each([
    ["left unset", PaymentStatus.UNSPECIFIED],
    ["a value the proto does not define", 7],
  ])("an answer whose status is %s is ambiguous (TIMEOUT, RAIL_STATUS_UNKNOWN), never a rejection", async (_what, status) => {
    const w = world({ rail: { status } });
    expect(await admission(w)(intent)).toEqual({ kind: "AMBIGUOUS", cause: "RAIL_STATUS_UNKNOWN" });
    expect(w.calls).toEqual(["admit", "rail", "record:TIMEOUT"]);
  });

  it("negative control: read as 'anything but ACCEPTED is REJECTED' (the old reading), the unset status is recorded as a rejection", async () => {
    const old = (status: number): RailStatusReading => (status === PaymentStatus.ACCEPTED ? "ACCEPTED" : "REJECTED");
    const w = world({ rail: { status: PaymentStatus.UNSPECIFIED } });
    expect(await admission(w, ALL, undefined, old)(intent)).toMatchObject({ kind: "ANSWERED" });
    expect(w.calls).toEqual(["admit", "rail", "record:REJECTED"]);
  });

  it("past the pre-forward budget the rail is not called: NOT_FORWARDED is recorded instead", async () => {
    const w = world({ admitTakesMs: 150 });
    expect(await admission(w)(intent)).toMatchObject({ kind: "NOT_FORWARDED" });
    expect(w.calls).toEqual(["admit", "not-forwarded"]);
  });

  it("a budget that passes after the first check, before the write: the gate refuses, nothing is sent, NOT_FORWARDED", async () => {
    const w = world({ admitTakesMs: 60, beforeGateMs: 60 });
    expect(await admission(w)(intent)).toMatchObject({ kind: "NOT_FORWARDED" });
    expect(w.calls).toEqual(["admit", "gate-refused", "not-forwarded"]);
    expect((await w.metrics.notForwarded.get()).values[0]?.value).toBe(1);
  });

  it("a request written after the budget (a stall past the gate) is counted as sent late; one in time is not", async () => {
    const inTime = world({ admitTakesMs: 40, afterGateMs: 40 });
    await admission(inTime)(intent);
    expect((await inTime.metrics.sentLate.get()).values[0]?.value ?? 0).toBe(0);
    const stalled = world({ admitTakesMs: 40, afterGateMs: 5000 });
    expect(await admission(stalled)(intent)).toMatchObject({ kind: "ANSWERED" });
    expect(stalled.calls).toEqual(["admit", "rail", "record:ACCEPTED"]);
    expect((await stalled.metrics.sentLate.get()).values[0]?.value).toBe(1);
  });

  it("a pause the monotonic clock did not see (a VM pause) is seen on paydb's deadline: the gate refuses, NOT_FORWARDED", async () => {
    const w = world({ admitTakesMs: 5, hiddenBeforeGateMs: 5000 });
    expect(await admission(w)(intent)).toMatchObject({ kind: "NOT_FORWARDED" });
    expect(w.calls).toEqual(["admit", "gate-refused", "not-forwarded"]);
  });

  it("negative control: with the wall-clock guard removed the same hidden pause is forwarded, and counted as sent late", async () => {
    const w = world({ admitTakesMs: 5, hiddenBeforeGateMs: 5000 });
    expect(await admission(w, { ...ALL, wallClock: false })(intent)).toMatchObject({ kind: "ANSWERED" });
    expect(w.calls).toEqual(["admit", "rail", "record:ACCEPTED"]);
    expect((await w.metrics.sentLate.get()).values[0]?.value).toBe(1);
  });

  it("paydb's deadline is checked the skew allowance early: a call starting inside it but within the allowance of its end is not forwarded", async () => {
    // Budget 100, allowance 10: at 95 ms on both clocks the monotonic budget holds, paydb's does not.
    const w = world({ admitTakesMs: 5, beforeGateMs: 90 });
    expect(await admission(w)(intent)).toMatchObject({ kind: "NOT_FORWARDED" });
    const inside = world({ admitTakesMs: 5, beforeGateMs: 80 });
    expect(await admission(inside)(intent)).toMatchObject({ kind: "ANSWERED" });
  });

  it.each([
    ["ahead", 50],
    ["behind", -50],
  ])("paydb's clock %s of this host's by more than the allowance: nothing is forwarded, counted", async (_how, aheadMs) => {
    const w = world({ paydbAheadMs: aheadMs });
    expect(await admission(w)(intent)).toMatchObject({ kind: "NOT_FORWARDED" });
    expect(w.calls).toEqual(["admit", "not-forwarded"]);
    expect((await w.metrics.clockSkew.get()).values[0]?.value).toBe(1);
    const within = world({ paydbAheadMs: Math.sign(aheadMs) * 5 });
    expect(await admission(within)(intent)).toMatchObject({ kind: "ANSWERED" });
  });

  it("negative control: with the budget removed the same slow admission is forwarded", async () => {
    const w = world({ admitTakesMs: 150 });
    await admission(w, { ...ALL, forwardBudgetMs: undefined })(intent);
    expect(w.calls).toContain("rail");
  });

  it("an answer for a row resolved meanwhile is recorded as a late answer, and the resolved row is the answer", async () => {
    const late = row("RESOLVED_NOT_PAID", { late_answer_state: "ACCEPTED" });
    const w = world({ recorded: undefined, late });
    const out = await admission(w)(intent);
    expect(w.calls).toEqual(["admit", "rail", "record:ACCEPTED", "late:ACCEPTED"]);
    expect(out).toEqual({ kind: "ANSWERED", row: late });
    expect(await w.metrics.lateAnswer.get()).toMatchObject({ values: [{ labels: { previous_state: "resolved_not_paid" }, value: 1 }] });
  });

  it("never invents a row: when the ledger cannot take the answer the outcome is ambiguous", async () => {
    const w = world({ recorded: Object.assign(new Error("Connection terminated"), { code: "57P01" }) });
    expect(await admission(w)(intent)).toEqual({ kind: "AMBIGUOUS", cause: "OUTCOME_NOT_RECORDED" });
    expect(w.calls.filter((c) => c === "rail")).toHaveLength(1);
  });

  it("the in-memory mark (a negative control) decides before the statement", async () => {
    const w = world();
    expect(await admission(w, ALL, () => false)(intent)).toEqual({ kind: "REFUSED", refusal: { kind: "FENCED_OUT" } });
    expect(w.calls).toEqual([]);
  });
});
