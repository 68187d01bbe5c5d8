/** executor configuration, read once from the environment. */
import { hostname } from "node:os";
import { z } from "zod";
import { databaseUrl, env, loadConfig } from "../shared/process/config.js";
import { processConfig, processEnvShape, type ProcessConfig } from "../shared/process/process-config.js";

const schema = z.object({
  ...processEnvShape(9500),
  /** paydb, the payment ledger (no password in the URL: see PAYDB_PASSWORD_FILE). */
  PAYDB_URL: env.url(),
  /** File holding paydb's password, if the URL needs one. */
  PAYDB_PASSWORD_FILE: env.optionalFile(),
  /** The lock service's URL. */
  LOCK_URL: z.url({ protocol: /^https?$/ }),
  /** The rail-proxy replicas' URLs, comma-separated; calls go round robin. */
  RAIL_PROXY_URLS: env.urlList("rail-proxy"),
  /**
   * Names this executor's claims and leases.
   * @default `executor-<host>-<pid>`
   */
  EXECUTOR_ID: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,64}$/, "1-64 characters of [A-Za-z0-9._:-]")
    .default(`executor-${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9._:-]/g, "-").slice(0, 64)),
  /** Payouts in flight at once. */
  EXECUTOR_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(4),
  /**
   * Group commit of the executor's fencing and outcome writes (decision 068's rule): the payouts
   * this executor's attempts fence (or close) while an earlier such statement is in paydb leave
   * together, one statement and one commit, each row by its own fence rule. 1: every write its own
   * statement (the design before; the benchmark compares the two).
   */
  EXECUTOR_BATCH_MAX: z.coerce.number().int().min(1).max(256).default(32),
  /** Group commit: fencing (and, apart, outcome) statements in paydb at once; what arrives meanwhile forms the next group. */
  EXECUTOR_BATCHES_IN_FLIGHT: z.coerce.number().int().min(1).max(64).default(2),
  /**
   * How it learns of payable payouts: `notify` (paydb tells it on a LISTEN connection, and it
   * still polls every POLL_INTERVAL_MS as a safety net) or `poll` (it only polls: the design
   * before decision 069, kept to measure against).
   */
  EXECUTOR_WAKE: z.enum(["notify", "poll"]).default("notify"),
  /**
   * Notify mode: which notifications it answers. `one`: each notification has one responder among
   * the listening executors, the others leave it alone unless their last claim was full (decision
   * 073); `all`: every executor answers every notification (the design of decision 069, kept to
   * measure against and as the fallback).
   */
  EXECUTOR_ANSWER: z.enum(["one", "all"]).default("one"),
  /** How often it reads which executors listen (one read of pg_stat_activity; decision 073). */
  EXECUTOR_PEERS_REFRESH_MS: env.ms(10_000, 100, 600_000),
  /**
   * How often it looks for payable payouts without being told: deferred retries and lapsed claims
   * are found only so, and every payout while the LISTEN connection is down (decision 069). Also
   * paces its retries of a payout.
   */
  POLL_INTERVAL_MS: env.ms(200, 10, 600_000),
  /** The lock lease it asks for (docs/executor.md). */
  LEASE_TTL_MS: env.ms(5000, 100, 600_000),
  /** How long it waits for a held account lock. */
  LOCK_WAIT_MS: env.ms(1000, 0, 60_000),
  /** Bound of every call to the lock service and the proxy. Past it the answer is "lost". */
  CALL_TIMEOUT_MS: env.ms(10_000, 50, 120_000),
  /** How long the rail may take to show a payment on its statement (the reconciler's setting of
   * the same name): a lost submission paydb forgot is paid again only once the statement covers
   * this long after it and shows nothing (decision 023). */
  SETTLEMENT_WINDOW_MS: env.ms(60_000, 1, 7 * 86_400_000),
  /** Added to that window: paydb's clock and the rail statement's may disagree by this much. */
  CLOCK_SKEW_ALLOWANCE_MS: env.ms(1000, 0, 600_000),
});

export interface ExecutorConfig extends ProcessConfig {
  paydbUrl: string;
  lockUrl: string;
  railProxyUrls: string[];
  executorId: string;
  concurrency: number;
  batchMax: number;
  batchesInFlight: number;
  wake: "notify" | "poll";
  answer: "one" | "all";
  peersRefreshMs: number;
  pollIntervalMs: number;
  leaseTtlMs: number;
  lockWaitMs: number;
  callTimeoutMs: number;
  settlementWindowMs: number;
  clockSkewAllowanceMs: number;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): ExecutorConfig {
  const c = loadConfig(schema, e);
  return {
    paydbUrl: databaseUrl(c.PAYDB_URL, c.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    lockUrl: c.LOCK_URL,
    railProxyUrls: c.RAIL_PROXY_URLS,
    executorId: c.EXECUTOR_ID,
    concurrency: c.EXECUTOR_CONCURRENCY,
    batchMax: c.EXECUTOR_BATCH_MAX,
    batchesInFlight: c.EXECUTOR_BATCHES_IN_FLIGHT,
    wake: c.EXECUTOR_WAKE,
    answer: c.EXECUTOR_ANSWER,
    peersRefreshMs: c.EXECUTOR_PEERS_REFRESH_MS,
    pollIntervalMs: c.POLL_INTERVAL_MS,
    leaseTtlMs: c.LEASE_TTL_MS,
    lockWaitMs: c.LOCK_WAIT_MS,
    callTimeoutMs: c.CALL_TIMEOUT_MS,
    settlementWindowMs: c.SETTLEMENT_WINDOW_MS,
    clockSkewAllowanceMs: c.CLOCK_SKEW_ALLOWANCE_MS,
    ...processConfig(c),
  };
}

/** The schema itself: the configuration reference (docs/configuration.md) is generated from it (tools/generate-config-doc.ts). */
export const configSchema = schema;
