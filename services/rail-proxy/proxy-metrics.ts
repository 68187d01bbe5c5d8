/** C4 §4.4 signals owned by rail-proxy. Label sets are bounded: no account or payout ids. */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export function createProxyMetrics(registry: Registry) {
  const registers = [registry];
  return {
    admitted: new Counter({ name: "railfence_rail_proxy_admitted_total", help: "Submissions admitted (mark advanced, intent committed)", registers }),
    admissionBatchSize: new Histogram({
      name: "railfence_rail_proxy_admission_batch_size",
      help: "Submissions per admission statement (group admission, decision 068; 1 = alone)",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers,
    }),
    outcomeBatchSize: new Histogram({
      name: "railfence_rail_proxy_outcome_batch_size",
      help: "Rail answers recorded per outcome statement (group commit, decision 068; 1 = alone)",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers,
    }),
    fencedOut: new Counter({ name: "railfence_rail_proxy_fenced_out_total", help: "Submissions refused: token not above the account's mark", registers }),
    duplicate: new Counter({
      name: "railfence_rail_proxy_duplicate_attempted_total",
      help: "Second submissions of a payout (must be zero: caller misbehaviour)",
      registers,
    }),
    railOutcome: new Counter({ name: "railfence_rail_proxy_rail_outcomes_total", help: "Rail call outcomes", labelNames: ["outcome"] as const, registers }),
    ambiguousUnresolved: new Gauge({ name: "railfence_rail_proxy_ambiguous_submissions", help: "Ambiguous submissions not yet resolved", registers }),
    ambiguousOldestAge: new Gauge({
      name: "railfence_rail_proxy_ambiguous_oldest_age_seconds",
      help: "Age of the oldest unresolved ambiguous submission",
      registers,
    }),
    fencingEnabled: new Gauge({
      name: "railfence_rail_proxy_fencing_enabled",
      help: "1 when high-water fencing is enforced (0 only in harness scenario C5 §5.2)",
      registers,
    }),
    resolved: new Counter({
      name: "railfence_rail_proxy_resolutions_total",
      help: "Ambiguous submissions resolved",
      labelNames: ["outcome"] as const,
      registers,
    }),
    guardEnabled: new Gauge({
      name: "railfence_rail_proxy_guard_enabled",
      help: "1 when a guard is enforced: mark, payout_binding, one_live, forward_budget (0 only in harness negative controls)",
      labelNames: ["guard"] as const,
      registers,
    }),
    bindingRefused: new Counter({
      name: "railfence_rail_proxy_binding_refusals_total",
      help: "Submissions refused because they do not match a payable payout (PAYOUT_NOT_FOUND, PAYOUT_MISMATCH, PAYOUT_NOT_PAYABLE, PAYOUT_FENCE_MISMATCH, PAYOUT_ALREADY_SUBMITTED)",
      labelNames: ["reason"] as const,
      registers,
    }),
    notForwarded: new Counter({
      name: "railfence_rail_proxy_not_forwarded_total",
      help: "Admitted submissions not forwarded: the pre-forward budget had passed",
      registers,
    }),
    paydbDurability: new Gauge({
      name: "railfence_rail_proxy_paydb_durability_declared",
      help: "1 for the paydb durability this proxy was told (PAYDB_DURABILITY: single-node, managed-ha, synchronous-standby)",
      labelNames: ["declared"] as const,
      registers,
    }),
    paydbDurable: new Gauge({
      name: "railfence_rail_proxy_paydb_durable",
      help: "1 when paydb is as durable as declared (synchronous-standby: a synchronous standby is attached); 0 refuses every admission",
      registers,
    }),
    notDurableRefusals: new Counter({
      name: "railfence_rail_proxy_not_durable_refusals_total",
      help: "Admissions refused because paydb was not as durable as declared (PAYDB_NOT_DURABLE)",
      registers,
    }),
    clockSkew: new Counter({
      name: "railfence_rail_proxy_clock_skew_refusals_total",
      help: "Admitted submissions not forwarded because paydb's clock and this host's differed by more than CLOCK_SKEW_ALLOWANCE_MS",
      registers,
    }),
    sentLate: new Counter({
      name: "railfence_rail_proxy_requests_sent_late_total",
      help: "Rail requests written to the socket after the pre-forward budget: a stall after the last check (the residual window)",
      registers,
    }),
    lateAnswer: new Counter({
      name: "railfence_rail_proxy_late_answers_total",
      help: "Rail answers for submissions no longer waiting for one (previous_state RESOLVED_*: must be zero, page)",
      labelNames: ["previous_state"] as const,
      registers,
    }),
    contradicted: new Counter({
      name: "railfence_rail_proxy_contradictions_recorded_total",
      help: "NOT_PAID resolutions recorded as contradicted by the rail statement",
      registers,
    }),
    admissionSeconds: new Histogram({
      name: "railfence_rail_proxy_admission_duration_seconds",
      help: "Admission transaction latency (mark + intent)",
      labelNames: ["result"] as const,
      // Up to the longest call deadline (120 s): the admission timeout is 5 s by default and may be higher.
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
    railCallSeconds: new Histogram({
      name: "railfence_rail_proxy_rail_call_duration_seconds",
      help: "Rail call latency",
      labelNames: ["outcome"] as const,
      // Up to the ceiling of RAIL_DEADLINE_MS (120 s): a call that ran into its deadline lands in a finite bucket.
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    }),
  };
}

export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;
