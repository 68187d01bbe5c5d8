/** Reconciler signals (C4 §4.4). Label sets are bounded: decisions only. */
import { Counter, Gauge, type Registry } from "prom-client";

export function createReconcilerMetrics(registry: Registry) {
  const registers = [registry];
  return {
    unresolved: new Gauge({
      name: "railfence_reconciler_unresolved_submissions",
      help: "Ambiguous submissions still unresolved after the last reconciler run",
      registers,
    }),
    oldestAge: new Gauge({
      name: "railfence_reconciler_unresolved_oldest_age_seconds",
      help: "Age of the oldest ambiguous submission left after the last run",
      registers,
    }),
    decisions: new Counter({
      name: "railfence_reconciler_decisions_total",
      help: "Reconciler decisions (PAID, NOT_PAID, WAIT, HUMAN, RACED, CONTRADICTED, UNRECORDED, ERROR)",
      labelNames: ["decision"] as const,
      registers,
    }),
    contradicted: new Counter({
      name: "railfence_reconciler_contradicted_total",
      help: "NOT_PAID resolutions the rail's statement later contradicted (must be zero: page)",
      registers,
    }),
    paidButFailed: new Counter({
      name: "railfence_reconciler_paid_but_failed_total",
      help: "Payouts the rail paid while the books said FAILED, flagged NEEDS_ATTENTION (must be zero: page)",
      registers,
    }),
    unrecordedPayments: new Counter({
      name: "railfence_reconciler_payments_without_intent_total",
      help: "Rail payments naming one of our payouts with no intent on the proxy's ledger: paydb lost acknowledged commits (must be zero: page)",
      registers,
    }),
    runs: new Counter({ name: "railfence_reconciler_runs_total", help: "Reconciler runs by result", labelNames: ["result"] as const, registers }),
  };
}

export type ReconcilerMetrics = ReturnType<typeof createReconcilerMetrics>;
