/**
 * rail-proxy's negative controls and planted stalls, built by the harness and handed to the
 * product's factory as dependencies (services/rail-proxy/guards.ts, decision 064). The product
 * reads none of these variables; only this harness entry does (entries/rail-proxy.ts), and a test
 * or drill turns one on by starting the proxy with it (ServiceProcess starts this entry then):
 *
 * - RAIL_PROXY_FENCING_ENABLED=false (ADR-007 D7): step 1, the mark, is skipped.
 * - RAIL_PROXY_MARK_STORE=memory: ADR-007's rejected ConcurrentHashMap<accountId, token>, which
 *   forgets on restart (failure i) and differs per replica (failure ii).
 * - RAIL_PROXY_DISABLED_GUARDS=payout-binding,one-live,forward-budget,send-gate,connected-session,wall-clock:
 *   the §3.9 guards (send-gate: the budget's second check, right before the write; wall-clock: the
 *   budget counted on paydb's deadline too), and the rail transport's (connected before the gate).
 * - RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: a stall planted after the first budget check, before
 *   the send gate (what the gate alone must catch).
 * - RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE: a stall planted in the residual window (after the
 *   last budget check, before the request is written), test/money-safety/stall-then-pay.test.ts.
 * - RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC=true: the two holds do not advance the budget's monotonic
 *   clock, as a VM pause the guest's monotonic clock did not see.
 * - RAIL_PROXY_OUTCOME_ONLY=true: the outcome statement records the rail's answer and leaves the
 *   payout alone, as a proxy from before decision 072 did (mid-rollout); its answers never say
 *   payout_closed.
 *
 * The statement guards (mark, payout binding, one-live) live in paydb's rail_admit, which has no
 * switch: removing one means admitting through harness_rail_admit, which the harness installs into
 * its own throwaway paydb first (unguarded-admission.ts).
 */
import { existsSync } from "node:fs";
import { z } from "zod";
import type { MarkPrecheck } from "../../../services/rail-proxy/admission.js";
import type { RailProxyControls } from "../../../services/rail-proxy/guards.js";
import { env as envTypes, loadConfig } from "../../../services/shared/process/config.js";
import { unguardedAdmission } from "../unguarded-admission.js";

/** Guards a negative control may remove, one at a time. */
export const REMOVABLE_GUARDS = ["payout-binding", "one-live", "forward-budget", "send-gate", "connected-session", "wall-clock"] as const;

const schema = z.object({
  RAIL_PROXY_FENCING_ENABLED: envTypes.bool(true),
  RAIL_PROXY_MARK_STORE: z.enum(["paydb", "memory"]).default("paydb"),
  RAIL_PROXY_DISABLED_GUARDS: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((g) => g.trim())
        .filter((g) => g.length > 0),
    )
    .pipe(z.array(z.enum(REMOVABLE_GUARDS))),
  RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE: z.string().min(1).optional(),
  RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: z.string().min(1).optional(),
  RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC: envTypes.bool(false),
  RAIL_PROXY_OUTCOME_ONLY: envTypes.bool(false),
});

/** The statement guards a control in env removes (each needs harness_rail_admit in paydb). */
export function statementGuardsFrom(env: NodeJS.ProcessEnv): { mark: boolean; binding: boolean; oneLive: boolean } {
  const c = loadConfig(schema, env);
  const off = new Set(c.RAIL_PROXY_DISABLED_GUARDS);
  return { mark: c.RAIL_PROXY_FENCING_ENABLED && c.RAIL_PROXY_MARK_STORE === "paydb", binding: !off.has("payout-binding"), oneLive: !off.has("one-live") };
}

/** The controls env asks for; undefined when it asks for none (the product as it ships). */
export function railProxyControls(env: NodeJS.ProcessEnv): RailProxyControls | undefined {
  const c = loadConfig(schema, env);
  const off = new Set(c.RAIL_PROXY_DISABLED_GUARDS);
  const statement = statementGuardsFrom(env);
  const planted: string[] = [];
  if (!c.RAIL_PROXY_FENCING_ENABLED) planted.push("RAIL_PROXY_FENCING_ENABLED=false");
  if (c.RAIL_PROXY_MARK_STORE === "memory") planted.push("RAIL_PROXY_MARK_STORE=memory");
  if (off.size > 0) planted.push(`RAIL_PROXY_DISABLED_GUARDS=${[...off].join(",")}`);
  if (c.RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE) planted.push(`RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE=${c.RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE}`);
  if (c.RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE) planted.push(`RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE=${c.RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE}`);
  if (c.RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC) planted.push("RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC=true");
  if (c.RAIL_PROXY_OUTCOME_ONLY) planted.push("RAIL_PROXY_OUTCOME_ONLY=true");
  if (planted.length === 0) return undefined;
  const holds = [
    c.RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE ? holdUntilFileExists(c.RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE) : undefined,
    c.RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE ? holdUntilFileExists(c.RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE) : undefined,
  ];
  const hidden = c.RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC ? hideFromMonotonic(holds) : undefined;
  const [holdAfterBudgetCheck, holdBeforeSendGate] = hidden?.holds ?? holds;
  const allOn = statement.mark && statement.binding && statement.oneLive;
  return {
    planted,
    admission: allOn ? undefined : unguardedAdmission(statement),
    markPrecheck: c.RAIL_PROXY_MARK_STORE === "memory" ? inMemoryMark() : undefined,
    guards: (g) => ({
      ...g,
      forwardBudgetMs: off.has("forward-budget") ? undefined : g.forwardBudgetMs,
      connectedSession: !off.has("connected-session"),
      sendGate: !off.has("send-gate"),
      wallClock: !off.has("wall-clock"),
    }),
    holdAfterBudgetCheck,
    holdBeforeSendGate,
    now: hidden?.now,
    closesAcceptedPayouts: !c.RAIL_PROXY_OUTCOME_ONLY,
  };
}

/**
 * Blocks the thread (no timers, no I/O: what a SIGSTOP or a long GC pause does) until `file`
 * exists, at most two minutes.
 */
export function holdUntilFileExists(file: string): () => void {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  return () => {
    const until = Date.now() + 120_000;
    while (!existsSync(file) && Date.now() < until) Atomics.wait(cell, 0, 0, 20);
  };
}

/**
 * A monotonic clock that does not see the given holds: what a guest's CLOCK_MONOTONIC shows across
 * a VM pause the hypervisor hid from it, while the wall clock is corrected afterwards.
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
// [rule:mark-memory]
export function inMemoryMark(): MarkPrecheck {
  const marks = new Map<string, bigint>();
  return (accountId, token) => {
    const seen = marks.get(accountId) ?? 0n;
    if (token <= seen) return false;
    marks.set(accountId, token);
    return true;
  };
}
// [/rule:mark-memory]
