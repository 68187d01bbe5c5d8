/** reconciler configuration, read once from the environment. */
import { z } from "zod";
import { databaseUrl, env, loadConfig } from "../shared/process/config.js";
import { processConfig, processEnvShape, type ProcessConfig } from "../shared/process/process-config.js";

const schema = z
  .object({
    ...processEnvShape(9600),
    /** paydb, the payment ledger (no password in the URL: see PAYDB_PASSWORD_FILE). */
    PAYDB_URL: env.url(),
    /** File holding paydb's password, if the URL needs one. */
    PAYDB_PASSWORD_FILE: env.optionalFile(),
    /** The rail-proxy replicas' URLs, comma-separated. */
    RAIL_PROXY_URLS: env.urlList("rail-proxy"),
    /**
     * How long the rail may take to show a payment on its statement before "absent" means "not
     * paid" (NOT_PAID). Must exceed 2 x RAIL_DEADLINE_MS + AMBIGUITY_MARGIN_MS + ADMISSION_TIMEOUT_MS.
     */
    SETTLEMENT_WINDOW_MS: env.ms(60_000, 1, 7 * 86_400_000),
    /** Added to the window: paydb's clock (created_at), this process's and the rail statement's
     * may disagree by this much (NTP keeps hosts within milliseconds; the rail is a third party). */
    CLOCK_SKEW_ALLOWANCE_MS: env.ms(1000, 0, 600_000),
    /** rail-proxy's setting of the same name (and default): the window must outlast it. */
    RAIL_DEADLINE_MS: env.ms(5000, 50, 120_000),
    /** rail-proxy's setting of the same name (and default): the window must outlast it. */
    AMBIGUITY_MARGIN_MS: env.ms(5000, 1, 600_000),
    /** rail-proxy's setting of the same name (and default): the window must outlast it. */
    ADMISSION_TIMEOUT_MS: env.ms(5000, 100, 600_000),
    /** How long every NOT_PAID resolution keeps being checked against the rail's statement. */
    CONTRADICTION_WATCH_MS: env.ms(7 * 86_400_000, 0, 90 * 86_400_000),
    /**
     * How far back rail payments naming our payouts are checked for an intent on the ledger (0:
     * off); one without is taken as its payout's payment and flagged (decision 037). After a paydb
     * restore, reach back past the restore point.
     */
    UNRECORDED_PAYMENT_WATCH_MS: env.ms(86_400_000, 0, 90 * 86_400_000),
    /** 0 = run once and exit (Kubernetes CronJob); > 0 = loop with this pause between runs. */
    RECONCILE_INTERVAL_MS: env.ms(0, 0, 86_400_000),
    /** Decide and print, change nothing. */
    RECONCILER_DRY_RUN: env.bool(false),
    /** Recorded on each resolution as who resolved it. */
    RECONCILER_ACTOR: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[\x20-\x7e]+$/, "printable ASCII")
      .default("reconciler"),
    /** Bound of every call to a rail-proxy. */
    CALL_TIMEOUT_MS: env.ms(10_000, 50, 120_000),
  })
  // [rule:config-window]
  .superRefine((c, ctx) => {
    // A submission's rail call starts at most (admission timeout) after its intent's created_at,
    // on a connected session only. Its request leaves the proxy within 2 x deadline of that, or
    // never: the call gives up at the deadline (resetting the connection if the request was not
    // yet written), and a connection that cannot deliver what it was handed answers no PING
    // (sent every deadline) and is reset (rail-proxy/rail-client.ts). The margin covers the
    // rest. Absent from the statement means not paid only after all of that.
    const bound = 2 * c.RAIL_DEADLINE_MS + c.AMBIGUITY_MARGIN_MS + c.ADMISSION_TIMEOUT_MS;
    if (c.SETTLEMENT_WINDOW_MS <= bound) {
      ctx.addIssue({
        code: "custom",
        path: ["SETTLEMENT_WINDOW_MS"],
        message: `must be greater than 2 x RAIL_DEADLINE_MS + AMBIGUITY_MARGIN_MS + ADMISSION_TIMEOUT_MS (${bound}): a payment could still be booked after a NOT_PAID verdict`,
      });
    }
  });
// [/rule:config-window]

/** Every variable the reconciler reads: the contract `railfence reconcile` (cli/reconcile-command.ts) runs it by. */
export const RECONCILER_ENV_KEYS: readonly string[] = Object.freeze(Object.keys(schema.shape));

export interface ReconcilerConfig extends ProcessConfig {
  paydbUrl: string;
  railProxyUrls: string[];
  settlementWindowMs: number;
  clockSkewAllowanceMs: number;
  contradictionWatchMs: number;
  unrecordedWatchMs: number;
  intervalMs: number;
  dryRun: boolean;
  actor: string;
  callTimeoutMs: number;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): ReconcilerConfig {
  const c = loadConfig(schema, e);
  return {
    paydbUrl: databaseUrl(c.PAYDB_URL, c.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    railProxyUrls: c.RAIL_PROXY_URLS,
    settlementWindowMs: c.SETTLEMENT_WINDOW_MS,
    clockSkewAllowanceMs: c.CLOCK_SKEW_ALLOWANCE_MS,
    contradictionWatchMs: c.CONTRADICTION_WATCH_MS,
    unrecordedWatchMs: c.UNRECORDED_PAYMENT_WATCH_MS,
    intervalMs: c.RECONCILE_INTERVAL_MS,
    dryRun: c.RECONCILER_DRY_RUN,
    actor: c.RECONCILER_ACTOR,
    callTimeoutMs: c.CALL_TIMEOUT_MS,
    ...processConfig(c),
  };
}

/** The schema itself: the configuration reference (docs/configuration.md) is generated from it (tools/generate-config-doc.ts). */
export const configSchema = schema;
