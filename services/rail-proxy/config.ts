/** rail-proxy configuration, read once from the environment. */
import { hostname } from "node:os";
import { z } from "zod";
import { databaseUrl, env, loadConfig, readSecretFile } from "../shared/process/config.js";
import { signingKeyFromFile } from "../shared/process/token-signature.js";
import { serverConfig, serverEnvShape, type ServerConfig } from "../shared/process/process-config.js";
import { DURABILITY_DECLARATIONS, type Durability } from "./paydb-durability.js";

const schema = z
  .object({
    ...serverEnvShape(7200, 9200),
    /** paydb's primary (no password in the URL: see PAYDB_PASSWORD_FILE). */
    PAYDB_URL: env.url(),
    /** File holding paydb's password, if the URL needs one. */
    PAYDB_PASSWORD_FILE: env.optionalFile(),
    /** paydb connection pool size. */
    PAYDB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(20),
    /**
     * What a paydb failover can lose, declared (paydb-durability.ts, decision 024);
     * `synchronous-standby` is checked: no admission while no synchronous standby is attached. No
     * default: the fence's every guard lives in paydb, so nobody gets a durability they did not choose.
     */
    PAYDB_DURABILITY: z.enum(DURABILITY_DECLARATIONS, {
      error: () => `declare paydb's durability: one of ${DURABILITY_DECLARATIONS.join(", ")} (docs/deploy.md)`,
    }),
    /** synchronous-standby: how often the attached synchronous standby is checked. */
    PAYDB_DURABILITY_CHECK_MS: env.ms(5000, 100, 600_000),
    /** The rail's URL. */
    RAIL_URL: z.url(),
    /** File holding the rail credential (a mounted Secret): only rail-proxy ever reads it (ADR-007 D1); never env or argv. */
    // [rule:d1-credential-file]
    RAIL_CREDENTIALS_FILE: z.string().min(1),
    // [rule:config-deadline-margin]
    /** Deadline of the single rail call; past it the submission is TIMEOUT (ambiguous). */
    RAIL_DEADLINE_MS: env.ms(5000, 50, 120_000),
    /** FORWARDING rows older than deadline + margin belong to a dead replica: ambiguous. */
    AMBIGUITY_MARGIN_MS: env.ms(5000, 1, 600_000),
    // [/rule:config-deadline-margin]
    /** statement_timeout of the proxy's paydb statements, admission included. */
    ADMISSION_TIMEOUT_MS: env.ms(5000, 100, 600_000),
    /**
     * Group admission (decision 068): most submissions admitted by one statement and one commit
     * (their outcomes are recorded the same way). Groups form only from what arrives while earlier
     * statements are in paydb: no timer, nothing waits at low load. 1: every submission its own
     * statement (the design before group admission; the benchmark compares the two).
     */
    ADMISSION_BATCH_MAX: z.coerce.number().int().min(1).max(1000).default(32),
    /** Group admission: admission statements (and, apart, outcome statements) in paydb at once; what arrives meanwhile forms the next group. */
    ADMISSION_BATCHES_IN_FLIGHT: z.coerce.number().int().min(1).max(200).default(2),
    /**
     * Longest time from sending the admission statement to starting the rail call; past it the
     * proxy does not forward (NOT_FORWARDED). Must be below AMBIGUITY_MARGIN_MS, so a call started
     * in time has ended before the sweeper may declare the row ambiguous.
     * @default margin / 2, at most 2000
     */
    RAIL_FORWARD_BUDGET_MS: z.coerce.number().int().min(1).max(600_000).optional(),
    /**
     * How far this host's wall clock may be from paydb's. The budget also ends at paydb's forward
     * deadline (the intent's created_at + budget), checked this much early on the wall clock; an
     * admission whose created_at lies further than this outside the statement's send and receipt
     * is not forwarded (the clocks disagree). Below half the budget (decision 022). The default
     * leaves room for NTP, which keeps hosts within a few ms.
     * @default budget / 4, at most 100
     */
    CLOCK_SKEW_ALLOWANCE_MS: z.coerce.number().int().min(0).max(60_000).optional(),
    /** Period of the sweeper, which declares FORWARDING rows older than deadline + margin ambiguous. */
    SWEEP_INTERVAL_MS: env.ms(2000, 100, 600_000),
    /** File holding a key shared with the lock service: tokens it did not sign are refused in step 0 (docs/security.md). */
    RAIL_PROXY_TOKEN_KEY_FILE: env.optionalFile(),
    /**
     * This replica's name, recorded on each intent.
     * @default `<host>-<pid>`
     */
    REPLICA_ID: z.string().min(1).max(128).default(`${hostname()}-${process.pid}`),
  })
  // [rule:config-budget]
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
// [/rule:config-budget]

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
  admissionBatchMax: number;
  admissionBatchesInFlight: number;
  forwardBudgetMs: number;
  clockSkewAllowanceMs: number;
  sweepIntervalMs: number;
  tokenKey: Buffer | undefined;
  replicaId: string;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): RailProxyConfig {
  const c = loadConfig(schema, e);
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
    admissionBatchMax: c.ADMISSION_BATCH_MAX,
    admissionBatchesInFlight: c.ADMISSION_BATCHES_IN_FLIGHT,
    forwardBudgetMs,
    clockSkewAllowanceMs: c.CLOCK_SKEW_ALLOWANCE_MS ?? defaultClockSkewAllowance(forwardBudgetMs),
    sweepIntervalMs: c.SWEEP_INTERVAL_MS,
    tokenKey: signingKeyFromFile(c.RAIL_PROXY_TOKEN_KEY_FILE, "RAIL_PROXY_TOKEN_KEY_FILE"),
    replicaId: c.REPLICA_ID,
    ...serverConfig(c),
  };
}

/** The schema itself: the configuration reference (docs/configuration.md) is generated from it (tools/generate-config-doc.ts). */
export const configSchema = schema;
