/** reconciler configuration, read once from the environment. */
import { z } from "zod";
import { databaseUrl, env, loadConfig } from "../shared/config.js";
import { processConfig, processEnvShape, type ProcessConfig } from "../shared/process-config.js";

const schema = z.object({
  ...processEnvShape(9600),
  PAYDB_URL: env.url(),
  PAYDB_PASSWORD_FILE: env.optionalFile(),
  RAIL_PROXY_URLS: env.urlList("rail-proxy"),
  /** How long the rail may take to show a payment on its statement before "absent" means "not paid". */
  SETTLEMENT_WINDOW_MS: env.ms(60_000, 0, 7 * 86_400_000),
  /** 0 = run once and exit (Kubernetes CronJob); > 0 = loop with this pause between runs. */
  RECONCILE_INTERVAL_MS: env.ms(0, 0, 86_400_000),
  RECONCILER_DRY_RUN: env.bool(false),
  RECONCILER_ACTOR: z.string().min(1).max(128).regex(/^[\x20-\x7e]+$/, "printable ASCII").default("reconciler"),
  /** Bound of every call to a rail-proxy. */
  CALL_TIMEOUT_MS: env.ms(10_000, 50, 120_000),
});

export interface ReconcilerConfig extends ProcessConfig {
  paydbUrl: string;
  railProxyUrls: string[];
  settlementWindowMs: number;
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
    intervalMs: c.RECONCILE_INTERVAL_MS,
    dryRun: c.RECONCILER_DRY_RUN,
    actor: c.RECONCILER_ACTOR,
    callTimeoutMs: c.CALL_TIMEOUT_MS,
    ...processConfig(c),
  };
}
