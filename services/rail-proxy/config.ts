/** rail-proxy configuration, read once from the environment. */
import { hostname } from "node:os";
import { z } from "zod";
import { databaseUrl, env, loadConfig, readSecretFile } from "../shared/config.js";
import { refuseHarnessOnly } from "../shared/harness-only.js";
import { signingKeyFromFile } from "../shared/token-signature.js";
import { serverConfig, serverEnvShape, type ServerConfig } from "../shared/process-config.js";
import { DURABILITY_DECLARATIONS, type Durability } from "./paydb-durability.js";

/** Guards a harness negative control may remove, one at a time (never in the Helm chart). */
export const REMOVABLE_GUARDS = ["payout-binding", "one-live", "forward-budget", "send-gate", "connected-session", "wall-clock"] as const;
export type RemovableGuard = (typeof REMOVABLE_GUARDS)[number];

const schema = z
  .object({
    ...serverEnvShape(7200, 9200),
    PAYDB_URL: env.url(),
    PAYDB_PASSWORD_FILE: env.optionalFile(),
    PAYDB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(20),
    /** What a paydb failover can lose, declared (paydb-durability.ts; no default: the fence's
     * every guard lives in paydb, so nobody gets a durability they did not choose). */
    PAYDB_DURABILITY: z.enum(DURABILITY_DECLARATIONS, {
      error: () => `declare paydb's durability: one of ${DURABILITY_DECLARATIONS.join(", ")} (docs/deploy.md)`,
    }),
    /** synchronous-standby: how often the attached synchronous standby is checked. */
    PAYDB_DURABILITY_CHECK_MS: env.ms(5000, 100, 600_000),
    RAIL_URL: z.url(),
    /** The rail credential: only rail-proxy ever reads it (ADR-007 D1). File only, never env/argv. */
    RAIL_CREDENTIALS_FILE: z.string().min(1),
    /** Deadline of the single rail call; past it the submission is TIMEOUT (ambiguous). */
    RAIL_DEADLINE_MS: env.ms(5000, 50, 120_000),
    /** FORWARDING rows older than deadline + margin belong to a dead replica: ambiguous. */
    AMBIGUITY_MARGIN_MS: env.ms(5000, 1, 600_000),
    /** statement_timeout of the proxy's paydb statements, admission included. */
    ADMISSION_TIMEOUT_MS: env.ms(5000, 100, 600_000),
    /**
     * Longest time from sending the admission statement to starting the rail call; past it the
     * proxy does not forward (NOT_FORWARDED). Must be below AMBIGUITY_MARGIN_MS, so a call started
     * in time has ended before the sweeper may declare the row ambiguous. Default: half the
     * margin, at most 2 s.
     */
    RAIL_FORWARD_BUDGET_MS: z.coerce.number().int().min(1).max(600_000).optional(),
    /**
     * How far this host's wall clock may be from paydb's. The budget also ends at paydb's forward
     * deadline (the intent's created_at + budget), checked this much early on the wall clock; an
     * admission whose created_at lies further than this outside the statement's send and receipt
     * is not forwarded (the clocks disagree). Below half the budget. Default: a quarter of the
     * budget, at most 100 ms (NTP keeps hosts within a few ms).
     */
    CLOCK_SKEW_ALLOWANCE_MS: z.coerce.number().int().min(0).max(60_000).optional(),
    SWEEP_INTERVAL_MS: env.ms(2000, 100, 600_000),
    /** D7: exists only for harness scenario C5 §5.2. The Helm chart cannot set it; the image refuses
     * it (shared/harness-only.ts), as it refuses the two below. */
    RAIL_PROXY_FENCING_ENABLED: env.bool(true),
    /** Harness only, a negative control for ADR-007 failures i-ii: "memory" keeps marks in a
     * per-process map (the rejected design) instead of paydb. The Helm chart cannot set it. */
    RAIL_PROXY_MARK_STORE: z.enum(["paydb", "memory"]).default("paydb"),
    /** Harness only, negative controls: a comma list of guards to remove (REMOVABLE_GUARDS). The
     * Helm chart cannot set it. */
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
    /** Harness only: after the last pre-forward budget check passed, the proxy's thread stops (as
     * a SIGSTOP there would) until this file exists: a stall planted in the residual window. The
     * Helm chart cannot set it. */
    RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE: z.string().min(1).optional(),
    /** Harness only: the same stall planted after the first budget check, before the send gate
     * asks again (what the gate alone must catch). The Helm chart cannot set it. */
    RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: z.string().min(1).optional(),
    /** Harness only: the two holds above are hidden from the budget's monotonic clock, as a VM
     * pause the guest's monotonic clock did not see (the wall clock must catch it). The Helm
     * chart cannot set it. */
    RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC: env.bool(false),
    /** Optional key shared with the lock service: refuse tokens it did not sign (step 0). */
    RAIL_PROXY_TOKEN_KEY_FILE: env.optionalFile(),
    REPLICA_ID: z.string().min(1).max(128).default(`${hostname()}-${process.pid}`),
  })
  .superRefine((c, ctx) => {
    const budget = c.RAIL_FORWARD_BUDGET_MS ?? defaultForwardBudget(c.AMBIGUITY_MARGIN_MS);
    if (budget >= c.AMBIGUITY_MARGIN_MS) {
      ctx.addIssue({
        code: "custom",
        path: ["RAIL_FORWARD_BUDGET_MS"],
        message: `must be below AMBIGUITY_MARGIN_MS (${c.AMBIGUITY_MARGIN_MS}): a rail call started later could still be running when the sweeper declares its row ambiguous`,
      });
    }
    if (c.CLOCK_SKEW_ALLOWANCE_MS !== undefined && 2 * c.CLOCK_SKEW_ALLOWANCE_MS >= budget) {
      ctx.addIssue({
        code: "custom",
        path: ["CLOCK_SKEW_ALLOWANCE_MS"],
        message: `must be below half the forward budget (${budget}): the paydb deadline is checked this much early, and at least half the budget must remain to start the rail call`,
      });
    }
  });

/** A quarter of the budget, at most 100 ms. */
export function defaultClockSkewAllowance(budgetMs: number): number {
  return Math.min(100, Math.floor(budgetMs / 4));
}

/** Half the margin, at most 2 s. */
export function defaultForwardBudget(marginMs: number): number {
  return Math.max(1, Math.min(2000, Math.floor(marginMs / 2)));
}

export interface RailProxyConfig extends ServerConfig {
  paydbUrl: string;
  paydbPoolMax: number;
  paydbDurability: Durability;
  paydbDurabilityCheckMs: number;
  railUrl: string;
  railCredential: string;
  railDeadlineMs: number;
  ambiguityMarginMs: number;
  admissionTimeoutMs: number;
  forwardBudgetMs: number;
  clockSkewAllowanceMs: number;
  disabledGuards: readonly RemovableGuard[];
  sweepIntervalMs: number;
  fencingEnabled: boolean;
  markStore: "paydb" | "memory";
  tokenKey: Buffer | undefined;
  replicaId: string;
  holdAfterBudgetCheckFile: string | undefined;
  holdBeforeSendGateFile: string | undefined;
  hideHoldsFromMonotonic: boolean;
}

/** The harness-only settings (negative controls) this configuration turns on, as "NAME=value". */
export function harnessSettings(
  c: Pick<RailProxyConfig, "fencingEnabled" | "markStore" | "disabledGuards"> & {
    holdAfterBudgetCheckFile?: string;
    holdBeforeSendGateFile?: string;
    hideHoldsFromMonotonic?: boolean;
  },
): string[] {
  const on: string[] = [];
  if (!c.fencingEnabled) on.push("RAIL_PROXY_FENCING_ENABLED=false");
  if (c.markStore === "memory") on.push("RAIL_PROXY_MARK_STORE=memory");
  if (c.disabledGuards.length > 0) on.push(`RAIL_PROXY_DISABLED_GUARDS=${c.disabledGuards.join(",")}`);
  if (c.holdAfterBudgetCheckFile) on.push(`RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE=${c.holdAfterBudgetCheckFile}`);
  if (c.holdBeforeSendGateFile) on.push(`RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE=${c.holdBeforeSendGateFile}`);
  if (c.hideHoldsFromMonotonic) on.push("RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC=true");
  return on;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): RailProxyConfig {
  const c = loadConfig(schema, e);
  // Before any secret is read: a negative control outside a development checkout is refused (exit 78).
  refuseHarnessOnly(
    harnessSettings({
      fencingEnabled: c.RAIL_PROXY_FENCING_ENABLED,
      markStore: c.RAIL_PROXY_MARK_STORE,
      disabledGuards: c.RAIL_PROXY_DISABLED_GUARDS,
      holdAfterBudgetCheckFile: c.RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE,
      holdBeforeSendGateFile: c.RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE,
      hideHoldsFromMonotonic: c.RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC,
    }),
  );
  const forwardBudgetMs = c.RAIL_FORWARD_BUDGET_MS ?? defaultForwardBudget(c.AMBIGUITY_MARGIN_MS);
  return {
    paydbUrl: databaseUrl(c.PAYDB_URL, c.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    paydbPoolMax: c.PAYDB_POOL_MAX,
    paydbDurability: c.PAYDB_DURABILITY,
    paydbDurabilityCheckMs: c.PAYDB_DURABILITY_CHECK_MS,
    railUrl: c.RAIL_URL,
    railCredential: readSecretFile(c.RAIL_CREDENTIALS_FILE, "RAIL_CREDENTIALS_FILE"),
    railDeadlineMs: c.RAIL_DEADLINE_MS,
    ambiguityMarginMs: c.AMBIGUITY_MARGIN_MS,
    admissionTimeoutMs: c.ADMISSION_TIMEOUT_MS,
    forwardBudgetMs,
    clockSkewAllowanceMs: c.CLOCK_SKEW_ALLOWANCE_MS ?? defaultClockSkewAllowance(forwardBudgetMs),
    disabledGuards: c.RAIL_PROXY_DISABLED_GUARDS,
    sweepIntervalMs: c.SWEEP_INTERVAL_MS,
    fencingEnabled: c.RAIL_PROXY_FENCING_ENABLED,
    markStore: c.RAIL_PROXY_MARK_STORE,
    tokenKey: signingKeyFromFile(c.RAIL_PROXY_TOKEN_KEY_FILE, "RAIL_PROXY_TOKEN_KEY_FILE"),
    replicaId: c.REPLICA_ID,
    holdAfterBudgetCheckFile: c.RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE,
    holdBeforeSendGateFile: c.RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE,
    hideHoldsFromMonotonic: c.RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC,
    ...serverConfig(c),
  };
}

/** The schema itself, for the configuration reference check (test/architecture/configuration-doc.test.ts). */
export const configSchema = schema;
