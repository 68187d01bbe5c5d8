/**
 * The variables the harness's controls read (controls/rail-proxy.ts, controls/executor.ts). A
 * service process given any of them, set, runs the harness entry (entries/<service>.ts) instead of
 * the product's main.js, which reads none of them (decision 064).
 */
export const CONTROL_VARIABLES: Readonly<Record<string, readonly string[]>> = {
  "rail-proxy": [
    "RAIL_PROXY_FENCING_ENABLED",
    "RAIL_PROXY_MARK_STORE",
    "RAIL_PROXY_DISABLED_GUARDS",
    "RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE",
    "RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE",
    "RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC",
    "RAIL_PROXY_OUTCOME_ONLY",
  ],
  executor: ["EXECUTOR_PAUSE_AFTER_FENCE_MS", "EXECUTOR_SUBMISSION_REFERENCE", "EXECUTOR_TRUST_NOT_FOUND", "EXECUTOR_TRUST_ACCEPTED"],
};

/** The control variables env sets for service (an empty value counts as unset). */
export function controlsIn(service: string, env: Record<string, string | undefined>): string[] {
  return (CONTROL_VARIABLES[service] ?? []).filter((name) => env[name] !== undefined && env[name] !== "");
}
