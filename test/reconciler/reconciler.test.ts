/**
 * UC-07 end to end: ambiguous submissions are made for real (the rail-stub lands a payment and
 * loses the answer, or never lands and hangs), then the reconciler runs as a one-shot process
 * (the CronJob mode) and closes them from the rail's statement, read through the proxy.
 *
 * The runs are one story in a fixed order inside a single test, because each run's outcome is
 * what the next one starts from: dry run (changes nothing) -> long window (only the landed
 * payment is closed) -> short window (the absent one is closed too; the double payment never).
 */
import { spawn } from "node:child_process";
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { ServiceProcess, serviceEntry } from "../../tools/harness/service-process.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { SubmitPayoutRequestSchema, SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { connectClient, eventually } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { insertPayouts, payoutStates, proxyClient, railPaymentCounts, setFaults } from "../executor/support.js";
import { letTimePass } from "../support/time.js";

const LANDED = "po-rec-landed";
const NEVER = "po-rec-never";
const DOUBLE = "po-rec-double";
const REJECTED = "po-rec-rejected";
const ALL = [LANDED, NEVER, DOUBLE, REJECTED];

/**
 * The proxies' timing, which the reconciler is told too: absent from the statement may mean
 * "not paid" only after 2 x deadline + margin + admission timeout (4000 ms here), so the short
 * settlement window is just above that.
 */
const PROXY_TIMING = { RAIL_DEADLINE_MS: "500", AMBIGUITY_MARGIN_MS: "1000", ADMISSION_TIMEOUT_MS: "2000" };
const SHORT_WINDOW_MS = 4500;

const t = useMesh({ proxies: 2, proxyEnv: PROXY_TIMING });

/**
 * Plays the executor: the payout fenced for its token, one submission through the proxy, and
 * the payout UNKNOWN once the rail's answer is lost.
 */
async function ambiguousSubmission(payoutId: string, i: number): Promise<void> {
  await insertPayouts(t.paydb, [{ payoutId, accountId: `acc-rec-${i}`, amountMinor: 2500n }]);
  const req = create(SubmitPayoutRequestSchema, {
    accountId: `acc-rec-${i}`,
    payoutId,
    fencingToken: 1n,
    amount: { amountMinor: 2500n, currency: "EUR" },
    beneficiary: `ben-acc-rec-${i}`,
  });
  const err = await proxyClient(t.mesh)
    .submitPayout(await fencedFor(t.paydb, req))
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(errorReason(err)).toBe("RAIL_AMBIGUOUS");
  await t.paydb.query("UPDATE payouts SET state = 'UNKNOWN' WHERE payout_id = $1", [payoutId]);
}

/**
 * Runs the reconciler once (RECONCILE_INTERVAL_MS=0, the CronJob mode) as a real process and
 * returns its exit code and summary. Spawned directly: a one-shot job never prints a ready line.
 */
async function reconcileOnce(env: Record<string, string>) {
  const child = spawn(process.execPath, [serviceEntry("reconciler")], {
    env: {
      ...process.env,
      ...PROXY_TIMING,
      PAYDB_URL: t.mesh.roleUrl("paydb", "reconciler"),
      RAIL_PROXY_URLS: t.mesh.proxies.map((x) => x.url).join(","),
      RECONCILE_INTERVAL_MS: "0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (out += c.toString("utf8")));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
  clearTimeout(timer);
  const events = out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const summary = events.find((l) => l.event === "reconcile_summary") as
    | { decisions: Record<string, number>; left_unresolved: number; unresolved_seen: number; dry_run: boolean }
    | undefined;
  return { code, summary, events };
}

async function unresolvedIds(): Promise<string[]> {
  const res = await proxyClient(t.mesh, 1).listUnresolved({});
  return res.submissions.map((s) => s.payoutId).sort();
}

describe("reconciler (UC-07)", () => {
  it("closes landed and never-landed submissions from the statement, honours the window, and never touches a double payment", async () => {
    await setFaults(t.mesh, [
      { kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, clientReferencePrefix: LANDED },
      { kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, clientReferencePrefix: DOUBLE },
      { kind: FaultKind.NEVER_LAND_HANG, clientReferencePrefix: NEVER },
    ]);
    await Promise.all([ambiguousSubmission(LANDED, 1), ambiguousSubmission(NEVER, 2), ambiguousSubmission(DOUBLE, 3)]);
    // REJECTED: the proxy's call times out, and the rail's books show a rejection for it (booked
    // here directly on the rail, as a late-booked refusal would appear on its statement).
    await setFaults(t.mesh, [{ kind: FaultKind.NEVER_LAND_HANG, clientReferencePrefix: REJECTED }]);
    await ambiguousSubmission(REJECTED, 4);
    const rail = connectClient(RailService, t.mesh.railStub.url, {
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${t.mesh.credential}`), next(req))],
    });
    await setFaults(t.mesh, [{ kind: FaultKind.REJECT, clientReferencePrefix: REJECTED }]);
    await rail.submitPayment({
      clientReference: REJECTED,
      accountId: "acc-rec-4",
      beneficiary: "ben-acc-rec-4",
      amount: { amountMinor: 2500n, currency: "EUR" },
    });
    // DOUBLE: the rail itself booked the payment a second time (out of scope to prevent, 00 §0.5).
    await setFaults(t.mesh, []);
    await rail.submitPayment({
      clientReference: DOUBLE,
      accountId: "acc-rec-3",
      beneficiary: "ben-acc-rec-3",
      amount: { amountMinor: 2500n, currency: "EUR" },
    });
    expect(await unresolvedIds()).toEqual([...ALL].sort());
    await letTimePass(SHORT_WINDOW_MS + 1200, "the short settlement window passes and the statement covers it (covered_until = now - 1 s)");

    // 1. Dry run with the short window: it would close three, changes nothing.
    const dry = await reconcileOnce({ SETTLEMENT_WINDOW_MS: String(SHORT_WINDOW_MS), RECONCILER_DRY_RUN: "true" });
    expect(dry.code).toBe(0);
    expect(dry.summary).toMatchObject({ dry_run: true, unresolved_seen: 4, left_unresolved: 4 });
    expect(dry.summary?.decisions).toMatchObject({ PAID: 1, NOT_PAID: 2, HUMAN: 1, WAIT: 0 });
    expect(await unresolvedIds()).toEqual([...ALL].sort());
    expect([...(await payoutStates(t.paydb, ALL)).values()].map((r) => r.state)).toEqual(["UNKNOWN", "UNKNOWN", "UNKNOWN", "UNKNOWN"]);

    // 2. A long window: the landed payment is on the statement (PAID) and the rejection is booked
    // (NOT_PAID); the absent one must wait, the double payment goes to a human.
    const long = await reconcileOnce({ SETTLEMENT_WINDOW_MS: "600000" });
    expect(long.code).toBe(0);
    expect(long.summary?.decisions).toMatchObject({ PAID: 1, NOT_PAID: 1, WAIT: 1, HUMAN: 1 });
    expect(await unresolvedIds()).toEqual([DOUBLE, NEVER].sort());
    let states = await payoutStates(t.paydb, ALL);
    const { rows } = await t.raildb.query<{ rail_reference: string }>("SELECT rail_reference FROM payments WHERE client_reference = $1", [LANDED]);
    expect(states.get(LANDED)).toMatchObject({ state: "PAID", rail_reference: rows[0]?.rail_reference });
    expect(states.get(REJECTED)).toMatchObject({ state: "FAILED", failure_reason: "INJECTED_REJECT" });
    expect(states.get(NEVER)?.state).toBe("UNKNOWN");
    const landed = await proxyClient(t.mesh).getSubmission({ payoutId: LANDED });
    expect(landed.submission?.state).toBe(SubmissionState.RESOLVED_PAID);
    expect(landed.submission?.resolution?.actor).toBe("reconciler");

    // 3. The short window has passed and is covered: the absent payment is NOT_PAID.
    const short = await reconcileOnce({ SETTLEMENT_WINDOW_MS: String(SHORT_WINDOW_MS), RECONCILER_ACTOR: "reconciler-test" });
    expect(short.code).toBe(0);
    expect(short.summary?.decisions).toMatchObject({ NOT_PAID: 1, HUMAN: 1, PAID: 0 });
    expect(short.summary?.left_unresolved).toBe(1);
    expect(await unresolvedIds()).toEqual([DOUBLE]);
    states = await payoutStates(t.paydb, ALL);
    expect(states.get(NEVER)).toMatchObject({ state: "FAILED", failure_reason: "NOT_ON_RAIL_STATEMENT" });
    expect(states.get(DOUBLE)?.state).toBe("UNKNOWN");
    const never = await proxyClient(t.mesh).getSubmission({ payoutId: NEVER });
    expect(never.submission?.state).toBe(SubmissionState.RESOLVED_NOT_PAID);
    expect(never.submission?.resolution?.actor).toBe("reconciler-test");
    expect(short.events.some((l) => l.event === "decision" && l.payout_id === DOUBLE && l.decision === "HUMAN")).toBe(true);

    // Never resubmits: the rail's ledger is exactly what the arrangement booked.
    expect(Object.fromEntries(await railPaymentCounts(t.raildb, ALL, "ACCEPTED"))).toEqual({ [LANDED]: 1, [NEVER]: 0, [DOUBLE]: 2, [REJECTED]: 0 });
  });

  it("an UNKNOWN payout whose holder moved on (newer fence) is FAILED once its only submission is resolved NOT_PAID, in one run", async () => {
    // Found on a cluster: a proxy died mid-call; the executor's next attempt, under a newer
    // token, found the old submission still open and recorded the payout UNKNOWN under that
    // token. The reconciler then closed the submission NOT_PAID but left the payout UNKNOWN for
    // ever (it failed a payout only while fence <= the submission's token), and no executor
    // picks up an UNKNOWN payout. Nothing can pay it any more: an UNKNOWN payout cannot be
    // fenced, so the binding admits no new submission for it.
    const STRANDED = "po-rec-stranded";
    const WORKING = "po-rec-working";
    await setFaults(t.mesh, [{ kind: FaultKind.NEVER_LAND_HANG, clientReferencePrefix: "po-rec-" }]);
    await Promise.all([ambiguousSubmission(STRANDED, 5), ambiguousSubmission(WORKING, 6)]);
    await setFaults(t.mesh, []);
    // STRANDED: the newer holder recorded UNKNOWN under token 5. WORKING: a newer holder is at work
    // (PROCESSING under token 5): its attempt is its own business, the reconciler must not fail it.
    await t.paydb.query("UPDATE payouts SET fence = 5 WHERE payout_id = ANY($1)", [[STRANDED, WORKING]]);
    await t.paydb.query("UPDATE payouts SET state = 'PROCESSING', claimed_by = 'executor-newer' WHERE payout_id = $1", [WORKING]);
    await letTimePass(SHORT_WINDOW_MS + 1200, "the short settlement window passes and the statement covers it");

    const run = await reconcileOnce({ SETTLEMENT_WINDOW_MS: String(SHORT_WINDOW_MS) });
    expect(run.code).toBe(0);
    const states = await payoutStates(t.paydb, [STRANDED, WORKING]);
    expect(states.get(STRANDED)).toMatchObject({ state: "FAILED", failure_reason: "NOT_ON_RAIL_STATEMENT" });
    expect(states.get(WORKING)?.state).toBe("PROCESSING");
    expect((await proxyClient(t.mesh).getSubmission({ payoutId: STRANDED })).submission?.state).toBe(SubmissionState.RESOLVED_NOT_PAID);
    expect(Object.fromEntries(await railPaymentCounts(t.raildb, [STRANDED, WORKING], "ACCEPTED"))).toEqual({ [STRANDED]: 0, [WORKING]: 0 });
  });

  it("in loop mode it reports ready, serves its gauges on /metrics and drains on SIGTERM", async () => {
    const p = new ServiceProcess({
      service: "reconciler",
      env: {
        ...PROXY_TIMING,
        METRICS_PORT: "0",
        PAYDB_URL: t.mesh.roleUrl("paydb", "reconciler"),
        RAIL_PROXY_URLS: t.mesh.proxies.map((x) => x.url).join(","),
        RECONCILE_INTERVAL_MS: "200",
        SETTLEMENT_WINDOW_MS: "600000",
      },
    });
    try {
      const ready = await p.start();
      expect(ready).toMatchObject({ port: 0 });
      const body = await eventually(
        async () => {
          const text = await (await fetch(`http://127.0.0.1:${ready!.metricsPort}/metrics`)).text();
          return /railfence_reconciler_runs_total\{[^}]*result="ok"[^}]*\} [1-9]/.test(text) ? text : undefined;
        },
        "a finished run on /metrics",
        30_000,
      );
      expect(body).toMatch(/^railfence_reconciler_unresolved_submissions\{[^}]*\} \d+/m);
      expect(body).toMatch(/^railfence_reconciler_unresolved_oldest_age_seconds\{[^}]*\} [\d.e+-]+/m);
    } finally {
      expect(await p.stop(15_000)).toBe(0);
    }
  });

  it("bad configuration exits 78 and names every problem", async () => {
    const r = await reconcileOnce({ RAIL_PROXY_URLS: "not-a-url", SETTLEMENT_WINDOW_MS: "-5" });
    expect(r.code).toBe(78);
    const failed = r.events.find((l) => l.event === "startup_failed");
    expect(String(failed?.error)).toContain("RAIL_PROXY_URLS");
    expect(String(failed?.error)).toContain("SETTLEMENT_WINDOW_MS");
  });
});
