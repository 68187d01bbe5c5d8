/**
 * The claim loop's wake-up rules (decision 069), in-process with a store whose claims the test
 * answers by hand. The poll interval is a minute: every claim seen here was caused by a nudge or a
 * freed slot, never by the poll.
 */
import { Registry } from "prom-client";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../shared/process/logger.js";
import { createExecutorMetrics } from "./executor-metrics.js";
import type { PayOutcome } from "./pay-one.js";
import type { ClaimedPayout, PayoutStore } from "./payout-store.js";
import { startWorker, type Worker } from "./worker.js";

/** Every claim any store below was asked for: answered (again, harmlessly) at the end of each test so the loops can stop. */
const unanswered: Array<(rows: ClaimedPayout[]) => void> = [];

/** A store whose every claim waits until the test answers it. */
function handClaims() {
  const pending: Array<(rows: ClaimedPayout[]) => void> = [];
  const store = {
    claim: () =>
      new Promise<ClaimedPayout[]>((resolve) => {
        pending.push(resolve);
        unanswered.push(resolve);
      }),
  } as unknown as PayoutStore;
  return { store, pending, claims: () => pending.length };
}

const payout = (n: number): ClaimedPayout => ({
  payoutId: `po-${n}`,
  accountId: "acc-1",
  amountMinor: 100n,
  currency: "EUR",
  beneficiary: "ben-1",
  state: "PENDING",
  fence: 0n,
  traceparent: null,
  createdAt: new Date(),
  lostSubmission: undefined,
});

/** Every hand-ended payout attempt below: ended at the end of each test so the workers can drain. */
const unfinished: Array<() => void> = [];

const workers: Worker[] = [];
afterEach(async () => {
  const stopped = Promise.all(workers.splice(0).map((w) => w.stop(0)));
  for (const answer of unanswered.splice(0)) answer([]);
  for (const finish of unfinished.splice(0)) finish();
  await stopped;
});

function worker(
  store: PayoutStore,
  payOne: (p: ClaimedPayout) => Promise<PayOutcome> = async () => "PAID",
  concurrency = 2,
  more: {
    claimAfterEveryFinish?: boolean;
    responders?: { answers: (pid: number) => boolean; lookAgain: () => void };
    payNext?: (accountId: string) => Promise<PayOutcome | "nothing" | "claim">;
  } = {},
) {
  const registry = new Registry();
  const metrics = createExecutorMetrics(registry);
  const w = startWorker({
    store,
    payOne,
    metrics,
    logger: createLogger("executor", "silent"),
    executorId: "exec-test",
    concurrency,
    pollIntervalMs: 60_000,
    claimMs: 1000,
    claimAfterEveryFinish: more.claimAfterEveryFinish ?? false,
    responders: more.responders,
    payNext: more.payNext,
  });
  workers.push(w);
  return { w, registry };
}

describe("the claim loop is told, not only polling", () => {
  it("a nudge while idle claims at once", async () => {
    const c = handClaims();
    const { w, registry } = worker(c.store);
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([]);
    // The pass is recorded, and from there the loop goes to its idle wait without yielding.
    const lastPass = registry.getSingleMetric("railfence_executor_last_pass_timestamp_seconds")!;
    await vi.waitFor(async () => expect((await lastPass.get()).values[0]?.value).toBeGreaterThan(0));
    w.nudge();
    await vi.waitFor(() => expect(c.claims()).toBe(2));
    expect((await registry.getSingleMetric("railfence_executor_wakeups_total")!.get()).values).toEqual([
      expect.objectContaining({ labels: { cause: "notify" }, value: 1 }),
    ]);
  });

  it("a nudge that arrives while a claim is in flight makes the loop claim again instead of sleeping", async () => {
    const c = handClaims();
    const { w } = worker(c.store);
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    w.nudge(); // the payout it announces committed after this claim's snapshot
    c.pending[0]!([]);
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });

  it("control: a claim that finds nothing, with no nudge, sleeps for the poll interval", async () => {
    const c = handClaims();
    worker(c.store);
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([]);
    await expect(vi.waitFor(() => expect(c.claims()).toBe(2), { timeout: 500 })).rejects.toThrow();
  });

  it("with every slot busy a nudge waits for a slot (no claim, no spin), then claims", async () => {
    const c = handClaims();
    const finish: Array<() => void> = [];
    const { w } = worker(c.store, () => new Promise<PayOutcome>((r) => finish.push(() => r("PAID"))), 1);
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([payout(1)]);
    await vi.waitFor(() => expect(finish).toHaveLength(1));
    w.nudge();
    w.nudge();
    await expect(vi.waitFor(() => expect(c.claims()).toBe(2), { timeout: 300 })).rejects.toThrow();
    finish[0]!();
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });
});

/** A payout attempt each test ends by hand. */
function handPayouts() {
  const finish: Array<() => void> = [];
  const payOne = () =>
    new Promise<PayOutcome>((r) => {
      finish.push(() => r("PAID"));
      unfinished.push(() => r("PAID"));
    });
  return { payOne, finish };
}

describe("a claim only when something may be waiting (decision 073)", () => {
  it("a payout that ends, with nothing announced meanwhile and a claim that was not full, does not claim again", async () => {
    const c = handClaims();
    const p = handPayouts();
    worker(c.store, p.payOne, 4);
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([payout(1)]); // one of four slots: nothing was left behind
    await vi.waitFor(() => expect(p.finish).toHaveLength(1));
    p.finish[0]!();
    await expect(vi.waitFor(() => expect(c.claims()).toBe(2), { timeout: 300 })).rejects.toThrow();
  });

  it("control: in poll mode every payout that ends claims again (nothing else says work is waiting)", async () => {
    const c = handClaims();
    const p = handPayouts();
    worker(c.store, p.payOne, 4, { claimAfterEveryFinish: true });
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([payout(1)]);
    await vi.waitFor(() => expect(p.finish).toHaveLength(1));
    p.finish[0]!();
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });

  it("a payout that ends after a full claim claims again (more may be left)", async () => {
    const c = handClaims();
    const p = handPayouts();
    worker(c.store, p.payOne, 2);
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([payout(1), payout(2)]); // every free slot filled
    await vi.waitFor(() => expect(p.finish).toHaveLength(2));
    p.finish[0]!();
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });
});

describe("one executor answers each notification (decision 073)", () => {
  const answersOnly = (pid: number) => ({ answers: (sender: number) => sender === pid, lookAgain: () => {} });

  it("a notification another executor ranks first for is left alone: no claim", async () => {
    const c = handClaims();
    const { w, registry } = worker(c.store, undefined, 2, { responders: answersOnly(7) });
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([]);
    w.nudge(8);
    await expect(vi.waitFor(() => expect(c.claims()).toBe(2), { timeout: 300 })).rejects.toThrow();
    expect((await registry.getSingleMetric("railfence_executor_notifications_total")!.get()).values).toEqual([
      expect.objectContaining({ labels: { answer: "left" }, value: 1 }),
    ]);
    w.nudge(7); // its own
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });

  it("a listener that reconnected (no sender) makes every executor look", async () => {
    const c = handClaims();
    const { w } = worker(c.store, undefined, 2, { responders: answersOnly(7) });
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([]);
    w.nudge(undefined);
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });

  it("an executor whose last claim was full answers every notification (work is piling up)", async () => {
    const c = handClaims();
    const p = handPayouts();
    const { w, registry } = worker(c.store, p.payOne, 3, { responders: answersOnly(7) });
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([payout(1), payout(2), payout(3)]); // full: every slot busy, no claim now
    await vi.waitFor(() => expect(p.finish).toHaveLength(3));
    w.nudge(8); // not its own, but the last claim was full
    // Answered, not left: the finish below would claim anyway (backlog), so the count says it.
    expect((await registry.getSingleMetric("railfence_executor_notifications_total")!.get()).values).toEqual([
      expect.objectContaining({ labels: { answer: "claim" }, value: 1 }),
    ]);
    p.finish[0]!();
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });
});

describe("a notification that names an account is answered with claim-and-fence (decision 075)", () => {
  const answersOnly = (pid: number) => ({ answers: (sender: number) => sender === pid, lookAgain: () => {} });

  /** payNext calls the test ends by hand, with the answer it chooses. */
  function handNext() {
    const calls: Array<{ accountId: string; end: (r: PayOutcome | "nothing" | "claim") => void }> = [];
    const payNext = (accountId: string) =>
      new Promise<PayOutcome | "nothing" | "claim">((resolve) => {
        calls.push({ accountId, end: resolve });
        unfinished.push(() => resolve("nothing"));
      });
    return { payNext, calls };
  }

  async function idleWorker(concurrency = 2) {
    const c = handClaims();
    const n = handNext();
    const { w, registry } = worker(c.store, undefined, concurrency, { responders: answersOnly(7), payNext: n.payNext });
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([]);
    return { c, n, w, registry };
  }

  it("its responder, with a slot free, takes the account's payout without a claim; the slot is busy meanwhile", async () => {
    const { c, n, w, registry } = await idleWorker(1);
    w.nudge(7, "acc-9");
    await vi.waitFor(() => expect(n.calls.map((x) => x.accountId)).toEqual(["acc-9"]));
    // The only slot is taken: the next notification waits for it, as a claim.
    w.nudge(7, "acc-10");
    expect(n.calls).toHaveLength(1);
    n.calls[0]!.end("PAID");
    await vi.waitFor(() => expect(c.claims()).toBe(2));
    const answers = (await registry.getSingleMetric("railfence_executor_notifications_total")!.get()).values;
    expect(answers).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ labels: { answer: "fence" }, value: 1 }),
        expect.objectContaining({ labels: { answer: "claim" }, value: 1 }),
      ]),
    );
  });

  it("when it does not reach a payout (lock held, paydb failing), a claim looks instead; when nothing was left, nothing more", async () => {
    const { c, n, w } = await idleWorker();
    w.nudge(7, "acc-1");
    await vi.waitFor(() => expect(n.calls).toHaveLength(1));
    n.calls[0]!.end("nothing");
    await expect(vi.waitFor(() => expect(c.claims()).toBe(2), { timeout: 300 })).rejects.toThrow();
    w.nudge(7, "acc-2");
    await vi.waitFor(() => expect(n.calls).toHaveLength(2));
    n.calls[1]!.end("claim");
    await vi.waitFor(() => expect(c.claims()).toBe(2));
  });

  it("not its own notification: left alone; one without an account: a claim", async () => {
    const { c, n, w } = await idleWorker();
    w.nudge(8, "acc-1");
    await expect(vi.waitFor(() => expect(n.calls.length + c.claims()).toBe(2), { timeout: 300 })).rejects.toThrow();
    w.nudge(7);
    await vi.waitFor(() => expect(c.claims()).toBe(2));
    expect(n.calls).toEqual([]);
  });

  it("an executor in backlog answers with a claim (it shares the work out), not claim-and-fence", async () => {
    const c = handClaims();
    const p = handPayouts();
    const n = handNext();
    const { w, registry } = worker(c.store, p.payOne, 3, { responders: answersOnly(7), payNext: n.payNext });
    await vi.waitFor(() => expect(c.claims()).toBe(1));
    c.pending[0]!([payout(1), payout(2), payout(3)]); // full: in backlog
    await vi.waitFor(() => expect(p.finish).toHaveLength(3));
    p.finish[0]!(); // a slot frees, and the backlog's claim is in flight
    await vi.waitFor(() => expect(c.claims()).toBe(2));
    w.nudge(7, "acc-1");
    expect(n.calls).toEqual([]);
    expect((await registry.getSingleMetric("railfence_executor_notifications_total")!.get()).values).toEqual([
      expect.objectContaining({ labels: { answer: "claim" }, value: 1 }),
    ]);
  });
});
