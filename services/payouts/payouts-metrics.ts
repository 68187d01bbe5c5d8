/** Signals owned by the payouts API. Label sets are bounded: no client, account or key values. */
import { Counter, Histogram, type Registry } from "prom-client";

export function createPayoutsMetrics(registry: Registry) {
  const registers = [registry];
  return {
    created: new Counter({ name: "railfence_payouts_created_total", help: "Payouts created (first request of a key that committed)", registers }),
    replays: new Counter({
      name: "railfence_payouts_idempotency_replays_total",
      help: "CreatePayout answered from the stored result of an earlier success",
      registers,
    }),
    conflicts: new Counter({
      name: "railfence_payouts_idempotency_conflicts_total",
      help: "CreatePayout refused: the same key is still in progress",
      registers,
    }),
    keyReused: new Counter({
      name: "railfence_payouts_idempotency_key_reused_total",
      help: "CreatePayout refused: a key was reused with a different body",
      registers,
    }),
    takeovers: new Counter({
      name: "railfence_payouts_idempotency_takeovers_total",
      help: "Keys taken over after their in-progress lease or retention expired",
      registers,
    }),
    unavailable: new Counter({
      name: "railfence_payouts_idempotency_unavailable_total",
      help: "CreatePayout refused because the idempotency store (paydb) was unavailable",
      registers,
    }),
    purged: new Counter({ name: "railfence_payouts_idempotency_purged_total", help: "Expired idempotency keys deleted by the purge job", registers }),
    limitRefusals: new Counter({
      name: "railfence_payouts_limit_refusals_total",
      help: "CreatePayout refused because a money limit would be exceeded",
      labelNames: ["limit"] as const,
      registers,
    }),
    limitStoreUnavailable: new Counter({
      name: "railfence_payouts_limit_store_unavailable_total",
      help: "CreatePayout refused because the money-limit store was unreachable or too slow (fail closed)",
      registers,
    }),
    limitContention: new Counter({
      name: "railfence_payouts_limit_contention_total",
      help: "CreatePayout refused because a limit counter stayed locked by other requests past LIMITS_LOCK_WAIT_MS (load, not an outage)",
      registers,
    }),
    limitCheckSeconds: new Histogram({
      name: "railfence_payouts_limit_check_duration_seconds",
      help: "Time to consume the money limits of one CreatePayout in the shared store",
      // Up to the longest call deadline (120 s): limit waits (LIMITS_TIMEOUT_MS, LIMITS_LOCK_WAIT_MS) reach 30 s.
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
    createSeconds: new Histogram({
      name: "railfence_payouts_create_duration_seconds",
      help: "CreatePayout latency by outcome",
      labelNames: ["outcome"] as const,
      // Up to the longest call deadline (120 s): limit waits (LIMITS_TIMEOUT_MS, LIMITS_LOCK_WAIT_MS) reach 30 s.
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
  };
}

export type PayoutsMetrics = ReturnType<typeof createPayoutsMetrics>;
