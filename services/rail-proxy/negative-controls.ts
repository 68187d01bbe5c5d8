/**
 * Harness negative controls: each removes one guard alone, so a drill can show the checker
 * catching what then gets through (SPEC C5 §5.2, C3 §3.9). None of them can be set through the
 * Helm chart (its schema refuses the variables); each is loud at start and every minute after.
 *
 * - RAIL_PROXY_FENCING_ENABLED=false (D7): step 1, the mark, is skipped.
 * - RAIL_PROXY_MARK_STORE=memory: ADR-007's rejected ConcurrentHashMap<accountId, token>, which
 *   forgets on restart (failure i) and differs per replica (failure ii).
 * - RAIL_PROXY_DISABLED_GUARDS=payout-binding,one-live,forward-budget,send-gate,connected-session,wall-clock:
 *   the §3.9 guards (send-gate: the budget's second check, right before the write; wall-clock:
 *   the budget counted on paydb's deadline too, not only on the monotonic clock), and the rail
 *   transport's (rail-client.ts: connected before the gate, reset when given up before the write).
 * - RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: a stall planted after the first budget check, before
 *   the send gate (what the gate alone must catch).
 * - RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE: not a guard removed but a stall planted in the
 *   residual window (after the last budget check, before the request is written), for the test
 *   that shows what then gets through is seen (test/money-safety/stall-then-pay.test.ts).
 * - RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC=true: the two holds above do not advance the budget's
 *   monotonic clock, as a VM pause the guest's monotonic clock did not see.
 */
import { existsSync } from "node:fs";
import type { Logger } from "../shared/logger.js";
import type { Guards, MarkPrecheck } from "./admission.js";
import type { RailProxyConfig } from "./config.js";
import type { ProxyMetrics } from "./proxy-metrics.js";

/** The guards this configuration enforces (all of them in production). */
export function guardsFrom(config: RailProxyConfig): Guards {
  const off = new Set(config.disabledGuards);
  return {
    mark: config.fencingEnabled && config.markStore === "paydb",
    binding: !off.has("payout-binding"),
    oneLive: !off.has("one-live"),
    forwardBudgetMs: off.has("forward-budget") ? undefined : config.forwardBudgetMs,
    connectedSession: !off.has("connected-session"),
    sendGate: !off.has("send-gate"),
    wallClock: !off.has("wall-clock"),
    clockSkewAllowanceMs: config.clockSkewAllowanceMs,
  };
}

/**
 * Blocks the thread (no timers, no I/O: what a SIGSTOP or a long GC pause does) until `file`
 * exists, at most two minutes. Harness only.
 */
export function holdUntilFileExists(file: string): () => void {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  return () => {
    const until = Date.now() + 120_000;
    while (!existsSync(file) && Date.now() < until) Atomics.wait(cell, 0, 0, 20);
  };
}

/**
 * A monotonic clock that does not see the given holds (RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC):
 * what a guest's CLOCK_MONOTONIC shows across a VM pause the hypervisor hid from it, while the
 * wall clock is corrected afterwards. Returns the wrapped holds and the clock. Harness only.
 */
export function hideFromMonotonic<H extends Array<(() => void) | undefined>>(holds: H): { holds: H; now: () => number } {
  let hiddenMs = 0;
  const wrapped = holds.map((hold) =>
    hold
      ? () => {
          const started = performance.now();
          hold();
          hiddenMs += performance.now() - started;
        }
      : undefined,
  ) as H;
  return { holds: wrapped, now: () => performance.now() - hiddenMs };
}

/** ADR-007's in-memory mark, decided before the statement. */
export function inMemoryMark(): MarkPrecheck {
  const marks = new Map<string, bigint>();
  return (accountId, token) => {
    const seen = marks.get(accountId) ?? 0n;
    if (token <= seen) return false;
    marks.set(accountId, token);
    return true;
  };
}

/** Sets the guard gauges and, for every guard removed, warns now and every minute. Returns a stop function. */
export function announceGuards(config: RailProxyConfig, guards: Guards, metrics: ProxyMetrics, logger: Logger): () => void {
  metrics.fencingEnabled.set(guards.mark ? 1 : 0);
  metrics.guardEnabled.set({ guard: "mark" }, guards.mark ? 1 : 0);
  metrics.guardEnabled.set({ guard: "payout_binding" }, guards.binding ? 1 : 0);
  metrics.guardEnabled.set({ guard: "one_live" }, guards.oneLive ? 1 : 0);
  metrics.guardEnabled.set({ guard: "forward_budget" }, guards.forwardBudgetMs === undefined ? 0 : 1);
  metrics.guardEnabled.set({ guard: "connected_session" }, guards.connectedSession ? 1 : 0);
  metrics.guardEnabled.set({ guard: "send_gate" }, guards.sendGate ? 1 : 0);
  metrics.guardEnabled.set({ guard: "wall_clock" }, guards.wallClock ? 1 : 0);
  const warnings: string[] = [];
  if (config.markStore === "memory") {
    warnings.push(
      "RAIL_PROXY_MARK_STORE=memory: marks live in this process only (ADR-007's rejected design). Restarts and other replicas WILL admit stale tokens.",
    );
  } else if (!config.fencingEnabled) {
    warnings.push("RAIL_PROXY_FENCING_ENABLED=false: high-water fencing is OFF. Stale executors WILL be admitted out of order.");
  }
  if (!guards.binding) warnings.push("payout-binding guard removed: submissions are no longer checked against their payouts. Anything can be paid to anyone.");
  if (!guards.oneLive) warnings.push("one-live guard removed: a payout can be submitted again under another reference while its first submission is live.");
  if (guards.forwardBudgetMs === undefined) warnings.push("forward-budget guard removed: a stalled proxy can pay a submission already resolved NOT_PAID.");
  if (!guards.sendGate)
    warnings.push("send-gate guard removed: the budget is checked once, before the rail client; a stall after it is not caught before the write.");
  if (!guards.connectedSession)
    warnings.push("connected-session guard removed: a rail request queued on a connection still being made leaves whenever it connects, after any verdict.");
  if (!guards.wallClock) warnings.push("wall-clock guard removed: the budget is counted on the monotonic clock alone; a pause it did not see is not caught.");
  if (config.hideHoldsFromMonotonic) warnings.push("RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC=true: the planted holds do not advance the monotonic clock.");
  if (config.holdBeforeSendGateFile)
    warnings.push(`RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE=${config.holdBeforeSendGateFile}: every rail call stalls before the send gate until the file exists.`);
  if (config.holdAfterBudgetCheckFile)
    warnings.push(
      `RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE=${config.holdAfterBudgetCheckFile}: every rail call stalls after its budget check until the file exists.`,
    );
  if (warnings.length === 0) return () => {};
  const warn = () => {
    for (const message of warnings) {
      logger.warn(
        { event: "fencing_disabled", mark_store: config.markStore, fencing_enabled: config.fencingEnabled, disabled_guards: config.disabledGuards },
        `${message} Harness negative controls only.`,
      );
    }
  };
  warn();
  const timer = setInterval(warn, 60_000);
  timer.unref();
  return () => clearInterval(timer);
}
