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

const workers: Worker[] = [];
afterEach(async () => {
  const stopped = Promise.all(workers.splice(0).map((w) => w.stop(0)));
  for (const answer of unanswered.splice(0)) answer([]);
  await stopped;
});

function worker(store: PayoutStore, payOne: (p: ClaimedPayout) => Promise<PayOutcome> = async () => "PAID", concurrency = 2) {
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
