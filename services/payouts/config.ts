/** payouts configuration, read once from the environment. */
import { z } from "zod";
import { databaseUrl, env, loadConfig } from "../shared/process/config.js";
import { serverConfig, serverEnvShape, type ServerConfig } from "../shared/process/process-config.js";
import { ID_PATTERN } from "../shared/domain/validation.js";
import { parseDailyAmounts, type LimitsConfig } from "./limits.js";

const DAY_MS = 86_400_000;
/** The documented floor of IDEMPOTENCY_RETENTION_MS (docs/payouts-api.md). */
export const RETENTION_FLOOR_MS = DAY_MS;

const schema = z
  .object({
    ...serverEnvShape(7400, 9400),
    /** paydb, the payment ledger (no password in the URL: see PAYDB_PASSWORD_FILE). */
    PAYDB_URL: env.url(),
    /** File holding paydb's password, if the URL needs one. */
    PAYDB_PASSWORD_FILE: env.optionalFile(),
    /** paydb connection pool size. */
    PAYDB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(20),
    /** A paydb statement running (or waiting for a lock) longer than this is cancelled: PAYDB_BUSY, retryable. */
    PAYDB_STATEMENT_TIMEOUT_MS: env.ms(5000, 100, 60_000),
    /**
     * How long a successful answer stays pinned to its key. At least 24 h (clients keep keys for a
     * day) unless IDEMPOTENCY_RETENTION_MIN_OVERRIDE, and never shorter than IDEMPOTENCY_LOCK_MS,
     * override or not (refused at start otherwise).
     */
    IDEMPOTENCY_RETENTION_MS: env.ms(DAY_MS, 100, 30 * DAY_MS),
    /** Tests only: allows a retention below 24 h (a short one shows expiry and purge in seconds). */
    IDEMPOTENCY_RETENTION_MIN_OVERRIDE: env.bool(false),
    /** How often expired keys are deleted. */
    IDEMPOTENCY_PURGE_INTERVAL_MS: env.ms(60_000, 50, DAY_MS),
    /** Lease of an IN_PROGRESS marker: a request that crashed frees its key after this long. */
    IDEMPOTENCY_LOCK_MS: env.ms(30_000, 100, 3_600_000),
    /** The client identity of callers without a certificate (plain h2c on loopback; caller-identity.ts). */
    PAYOUTS_DEFAULT_CLIENT_ID: z.string().regex(ID_PATTERN, "must be 1-64 characters of [A-Za-z0-9._:-]").default("local-default"),
    /** Identities (from client certificates) allowed to call the payouts API under mutual TLS. */
    PAYOUTS_CLIENT_IDENTITIES: z
      .string()
      .default("client,operator")
      .transform((s) =>
        s
          .split(",")
          .map((v) => v.trim())
          .filter((v) => v.length > 0),
      )
      .pipe(z.array(z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "identities are 1-64 characters of [A-Za-z0-9._-]")).min(1, "name at least one identity")),
    /**
     * The money-limit store (limits.ts): a database with the paydb migrations. Unset, the limits
     * live in paydb and CreatePayout is one statement and one commit (decision 071); set (even to
     * paydb's own URL), CreatePayout runs in steps: key claim, limits, payout (three commits).
     * @default paydb (`PAYDB_URL`)
     */
    LIMITS_DB_URL: env.url().optional(),
    /** File holding the limit store's password, if its URL needs one. */
    LIMITS_DB_PASSWORD_FILE: env.optionalFile(),
    /** Connection pool size of the limit store. */
    LIMITS_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
    /**
     * A limit store slower than this counts as unavailable: money movement refuses, fast. Applies to
     * a store of its own (LIMITS_DB_URL); limits in paydb are bounded by PAYDB_STATEMENT_TIMEOUT_MS.
     */
    LIMITS_TIMEOUT_MS: env.ms(1000, 50, 30_000),
    /**
     * How long a request waits for a counter row another request holds (a hot client and account).
     * Past it: UNAVAILABLE LIMITS_CONTENDED, retryable; contention is load, not an outage.
     */
    LIMITS_LOCK_WAIT_MS: env.ms(2000, 50, 30_000),
    /** Money limit: payout-creating requests (CreatePayout executions) per client per LIMIT_CLIENT_WINDOW_MS (0 = off). */
    LIMIT_CLIENT_REQUESTS: z.coerce.number().int().min(0).max(1_000_000_000).default(6000),
    /** The window of LIMIT_CLIENT_REQUESTS. */
    LIMIT_CLIENT_WINDOW_MS: env.ms(60_000, 1000, 86_400_000),
    /** Money limit: amount in minor units per client per account per currency per UTC day (`EUR=500000000,USD=off,*=1000000000`). */
    LIMIT_ACCOUNT_DAILY_AMOUNT: z
      .string()
      .default("*=1000000000")
      .transform((s, ctx) => {
        try {
          return parseDailyAmounts(s);
        } catch (err) {
          ctx.addIssue({ code: "custom", message: (err as Error).message });
          return z.NEVER;
        }
      }),
  })
  .superRefine((c, ctx) => {
    if (c.IDEMPOTENCY_RETENTION_MS < RETENTION_FLOOR_MS && !c.IDEMPOTENCY_RETENTION_MIN_OVERRIDE) {
      ctx.addIssue({
        code: "custom",
        path: ["IDEMPOTENCY_RETENTION_MS"],
        message: `must be at least ${RETENTION_FLOOR_MS} (24 h): a client retrying a lost answer within a day must get that answer, not a second payout (tests may set IDEMPOTENCY_RETENTION_MIN_OVERRIDE=true)`,
      });
    }
    // A key forgotten while its first request may still run would let a retry create a second payout.
    if (c.IDEMPOTENCY_RETENTION_MS < c.IDEMPOTENCY_LOCK_MS) {
      ctx.addIssue({
        code: "custom",
        path: ["IDEMPOTENCY_RETENTION_MS"],
        message: `must not be shorter than IDEMPOTENCY_LOCK_MS (${c.IDEMPOTENCY_LOCK_MS}), the lease of a request in progress`,
      });
    }
  });

export interface PayoutsConfig extends ServerConfig {
  paydbUrl: string;
  paydbPoolMax: number;
  paydbStatementTimeoutMs: number;
  retentionMs: number;
  purgeIntervalMs: number;
  lockMs: number;
  defaultClientId: string;
  clientIdentities: string[];
  limitsDbUrl: string;
  /** LIMITS_DB_URL unset: the limits live in paydb, and one statement can create a payout. */
  limitsInPaydb: boolean;
  limitsPoolMax: number;
  limitsTimeoutMs: number;
  limitsLockWaitMs: number;
  limits: LimitsConfig;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): PayoutsConfig {
  const c = loadConfig(schema, e);
  return {
    paydbUrl: databaseUrl(c.PAYDB_URL, c.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    paydbPoolMax: c.PAYDB_POOL_MAX,
    paydbStatementTimeoutMs: c.PAYDB_STATEMENT_TIMEOUT_MS,
    retentionMs: c.IDEMPOTENCY_RETENTION_MS,
    purgeIntervalMs: c.IDEMPOTENCY_PURGE_INTERVAL_MS,
    lockMs: c.IDEMPOTENCY_LOCK_MS,
    defaultClientId: c.PAYOUTS_DEFAULT_CLIENT_ID,
    clientIdentities: c.PAYOUTS_CLIENT_IDENTITIES,
    limitsDbUrl: c.LIMITS_DB_URL
      ? databaseUrl(c.LIMITS_DB_URL, c.LIMITS_DB_PASSWORD_FILE, "LIMITS_DB_PASSWORD_FILE")
      : databaseUrl(c.PAYDB_URL, c.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    limitsInPaydb: !c.LIMITS_DB_URL,
    limitsPoolMax: c.LIMITS_POOL_MAX,
    limitsTimeoutMs: c.LIMITS_TIMEOUT_MS,
    limitsLockWaitMs: c.LIMITS_LOCK_WAIT_MS,
    limits: { clientRequests: c.LIMIT_CLIENT_REQUESTS, clientWindowMs: c.LIMIT_CLIENT_WINDOW_MS, accountDailyAmount: c.LIMIT_ACCOUNT_DAILY_AMOUNT },
    ...serverConfig(c),
  };
}

/** The schema itself: the configuration reference (docs/configuration.md) is generated from it (tools/generate-config-doc.ts). */
export const configSchema = schema;
