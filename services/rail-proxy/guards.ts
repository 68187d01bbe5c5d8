/**
 * The guards a rail-proxy runs with, and how it reports them. Production builds every one from
 * its config (productionGuards); nothing in the product can remove one: no setting, no schema
 * flag (decision 064). A harness negative control removes one by building the service with other
 * dependencies (RailProxyControls, tools/harness/controls/rail-proxy.ts), and the proxy still
 * reports what it runs with: the guard gauges, and a warning at start and every minute after.
 */
import type { Logger } from "../shared/process/logger.js";
import type { Guards, MarkPrecheck } from "./admission.js";
import type { RailProxyConfig } from "./config.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { AdmissionStatement, StatementGuards } from "./submission-store.js";

/** Every guard on: the only guards the product builds. */
// [rule:d7-production-guards]
export function productionGuards(config: Pick<RailProxyConfig, "forwardBudgetMs" | "clockSkewAllowanceMs">): Guards {
  return {
    forwardBudgetMs: config.forwardBudgetMs,
    connectedSession: true,
    sendGate: true,
    wallClock: true,
    clockSkewAllowanceMs: config.clockSkewAllowanceMs,
  };
}

/**
 * What a harness swaps in to show that a guard matters (each removes one guard alone) or to plant
 * a stall. Production passes none. The statement guards (mark, binding, one-live) are the
 * admission statement's: a control brings its own statement, installed in its own database.
 */
export interface RailProxyControls {
  /** Names of what is planted, for the warnings (e.g. "send-gate removed"). */
  planted: readonly string[];
  guards?: (production: Guards) => Guards;
  admission?: AdmissionStatement;
  markPrecheck?: MarkPrecheck;
  holdAfterBudgetCheck?: () => void;
  holdBeforeSendGate?: () => void;
  /** The budget's monotonic clock. */
  now?: () => number;
  /** false: the outcome statement leaves the payout alone (a proxy from before decision 072). */
  closesAcceptedPayouts?: boolean;
}

const WARNINGS: Array<[guard: string, off: (g: Guards, s: StatementGuards) => boolean, message: string]> = [
  ["mark", (_g, s) => !s.mark, "high-water fencing is OFF: stale executors WILL be admitted out of order."],
  [
    "payout_binding",
    (_g, s) => !s.binding,
    "payout-binding guard removed: submissions are no longer checked against their payouts. Anything can be paid to anyone.",
  ],
  ["one_live", (_g, s) => !s.oneLive, "one-live guard removed: a payout can be submitted again under another reference while its first submission is live."],
  ["forward_budget", (g) => g.forwardBudgetMs === undefined, "forward-budget guard removed: a stalled proxy can pay a submission already resolved NOT_PAID."],
  [
    "connected_session",
    (g) => !g.connectedSession,
    "connected-session guard removed: a rail request queued on a connection still being made leaves whenever it connects, after any verdict.",
  ],
  [
    "send_gate",
    (g) => !g.sendGate,
    "send-gate guard removed: the budget is checked once, before the rail client; a stall after it is not caught before the write.",
  ],
  ["wall_clock", (g) => !g.wallClock, "wall-clock guard removed: the budget is counted on the monotonic clock alone; a pause it did not see is not caught."],
];

/** Sets the guard gauges and, for every guard removed or stall planted, warns now and every minute. Returns a stop function. */
export function announceGuards(guards: Guards, statement: StatementGuards, planted: readonly string[], metrics: ProxyMetrics, logger: Logger): () => void {
  metrics.fencingEnabled.set(statement.mark ? 1 : 0);
  const warnings: string[] = [];
  for (const [guard, off, message] of WARNINGS) {
    metrics.guardEnabled.set({ guard }, off(guards, statement) ? 0 : 1);
    if (off(guards, statement)) warnings.push(message);
  }
  if (warnings.length === 0 && planted.length === 0) return () => {};
  const warn = () => {
    for (const message of warnings) logger.warn({ event: "fencing_disabled", planted }, `${message} Harness negative controls only.`);
    if (planted.length > 0)
      logger.warn({ event: "harness_controls", planted }, `harness controls are planted (${planted.join(", ")}): a drill or test process, never production`);
  };
  warn();
  const timer = setInterval(warn, 60_000);
  timer.unref();
  return () => clearInterval(timer);
}
