/**
 * The payout backlog and the reconciler's last pass, read from paydb when /metrics is scraped
 * (decisions 060, 061). Exported by the payouts service only: every replica exports the same
 * values (one shared table, not per-replica state), so dashboards and alerts take
 * `max by (namespace, state)`, never sum. One read serves every gauge and is reused for
 * `minIntervalMs`: several scrapers (or replicas' scrapes in a burst) cost paydb one query per
 * interval per replica, whatever the scrape rate.
 *
 * A read that fails removes the series (they vanish rather than freeze at a stale value), counts
 * the failure and logs once per outage; the scrape itself still succeeds with every other metric.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { Logger } from "../shared/process/logger.js";
import { BACKLOG_STATES, type BacklogSnapshot, type BacklogStore } from "./backlog-store.js";

export function registerBacklogMetrics(registry: Registry, deps: { store: BacklogStore; logger: Logger; minIntervalMs: number; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const registers = [registry];
  let cached: { at: number; snapshot: Promise<BacklogSnapshot | undefined> } | undefined;
  let failing = false;

  const readFailures = new Counter({
    name: "railfence_payouts_backlog_read_failures_total",
    help: "Scrape-time reads of the payout backlog and the reconciler's last pass that failed (the gauges are left out of that scrape)",
    registers,
  });

  /** The snapshot of the last minIntervalMs, or a new read; concurrent scrapes share one read. */
  function snapshot(): Promise<BacklogSnapshot | undefined> {
    const t = now();
    if (cached && t - cached.at < deps.minIntervalMs) return cached.snapshot;
    const read = deps.store.read().then(
      (s) => {
        if (failing) deps.logger.info({ event: "backlog_read_back" }, "payout backlog readable again");
        failing = false;
        return s;
      },
      (err: unknown) => {
        readFailures.inc();
        if (!failing)
          deps.logger.warn({ event: "backlog_read_failed", error: err instanceof Error ? err.message : String(err) }, "cannot read the payout backlog");
        failing = true;
        return undefined;
      },
    );
    cached = { at: t, snapshot: read };
    return read;
  }

  const count = new Gauge({
    name: "railfence_payouts_backlog",
    help: "Payouts waiting in a state that is not final (pending, processing, unknown, needs_attention), read from paydb; the same on every payouts replica: use max, not sum",
    labelNames: ["state"] as const,
    registers,
    async collect() {
      const s = await snapshot();
      this.reset();
      if (s) for (const state of BACKLOG_STATES) this.set({ state: state.toLowerCase() }, s.states[state].count);
    },
  });
  const oldestAge = new Gauge({
    name: "railfence_payouts_backlog_oldest_age_seconds",
    help: "Age (since created_at, by paydb's clock) of the oldest payout waiting in the state; 0 when none waits. The same on every payouts replica: use max",
    labelNames: ["state"] as const,
    registers,
    async collect() {
      const s = await snapshot();
      this.reset();
      if (s) for (const state of BACKLOG_STATES) this.set({ state: state.toLowerCase() }, s.states[state].oldestAgeSeconds);
    },
  });
  const reconcilerLastPass = new Gauge({
    name: "railfence_reconciler_last_pass_timestamp_seconds",
    help: "Unix time (paydb's clock) the reconciler last finished a pass, as recorded in paydb (0: never). Exported by payouts because the reconciler is a short-lived CronJob",
    registers,
    async collect() {
      const s = await snapshot();
      if (s) this.set(s.reconcilerLastPassSeconds);
      else this.remove();
    },
  });
  return { count, oldestAge, reconcilerLastPass, readFailures };
}
