/** Executor signals (C4 §4.4). Label sets are bounded: outcomes only, never payout or account ids. */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export function createExecutorMetrics(registry: Registry) {
  const registers = [registry];
  return {
    payouts: new Counter({
      name: "railfence_executor_payouts_total",
      help: "Payout attempts by outcome (PAID, FAILED, UNKNOWN, NEEDS_ATTENTION, FENCED_OUT, DEFERRED, ABANDONED)",
      labelNames: ["outcome"] as const,
      registers,
    }),
    paydbBatchSize: new Histogram({
      name: "railfence_executor_paydb_batch_size",
      help: "Payouts per fencing (statement=fence) or outcome (statement=record) statement: group commit, 1 = alone",
      labelNames: ["statement"] as const,
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers,
    }),
    endToEnd: new Histogram({
      name: "railfence_executor_payout_end_to_end_duration_seconds",
      help: "Payout created_at -> terminal state (PAID, FAILED, UNKNOWN or NEEDS_ATTENTION) recorded by an executor",
      labelNames: ["state"] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    lockAcquire: new Histogram({
      name: "railfence_executor_lock_acquire_duration_seconds",
      help: "Lock service Acquire latency (including waiting for a held lock)",
      labelNames: ["result"] as const,
      // Up to the longest call deadline (120 s): LOCK_WAIT_MS and CALL_TIMEOUT_MS go beyond 5 s.
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
    fencedOut: new Counter({
      name: "railfence_executor_fenced_out_total",
      help: "Work stopped because a newer token owns the payout or account (where: paydb fence or rail-proxy mark)",
      labelNames: ["where"] as const,
      registers,
    }),
    inFlight: new Gauge({ name: "railfence_executor_payouts_in_flight", help: "Payouts being worked on now", registers }),
    lastPass: new Gauge({
      name: "railfence_executor_last_pass_timestamp_seconds",
      help: "Unix time this executor's claim loop last completed a pass against paydb (claimed work, or found none); 0 until the first (decision 061)",
      registers,
    }),
    wakeups: new Counter({
      name: "railfence_executor_wakeups_total",
      help: "Claim-loop waits ended, by cause: notify (paydb announced payable payouts; also one announced during a claim, which skips the wait), poll (POLL_INTERVAL_MS passed), finished (a payout in flight ended)",
      labelNames: ["cause"] as const,
      registers,
    }),
    claims: new Counter({
      name: "railfence_executor_claims_total",
      help: "Claims sent to paydb, by whether they found payable payouts (payouts) or nothing (none: a commit for nothing)",
      labelNames: ["found"] as const,
      registers,
    }),
    fenceNext: new Counter({
      name: "railfence_executor_fence_next_total",
      help: "Claim-and-fence statements after a notification that named an account (decision 075), by whether they took a payout (payout) or found none to take (none)",
      labelNames: ["found"] as const,
      registers,
    }),
    notifications: new Counter({
      name: "railfence_executor_notifications_total",
      help: "paydb's payable notifications received, by answer: fence (this executor answers, taking the named account's lock and its oldest payable payout in one statement; decision 075), claim (this executor answers with a claim) or left (another listening executor ranks first for it; decision 073)",
      labelNames: ["answer"] as const,
      registers,
    }),
    responders: new Gauge({
      name: "railfence_executor_listening_executors",
      help: "Listening executors in this executor's view (itself included), among which each notification has one responder",
      registers,
    }),
    forgottenIntent: new Counter({
      name: "railfence_executor_forgotten_submissions_total",
      help: "Lost submissions paydb did not know afterwards, by what the rail's statement decided (paid, not-paid, wait, human)",
      labelNames: ["verdict"] as const,
      registers,
    }),
    needsAttention: new Counter({
      name: "railfence_executor_needs_attention_total",
      help: "Payouts put in NEEDS_ATTENTION (a refusal no retry can cure, or a contradicted outcome), by reason",
      labelNames: ["reason"] as const,
      registers,
    }),
  };
}

export type ExecutorMetrics = ReturnType<typeof createExecutorMetrics>;
