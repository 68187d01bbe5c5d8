/**
 * `railfence reconcile [--dry-run]`: runs the reconciler once, in the foreground.
 *
 * It starts the compiled reconciler (`dist/services/reconciler/main.js`, next to this CLI) with
 * RECONCILE_INTERVAL_MS=0 (its run-once CronJob mode) and the CLI's resolved endpoints, streams
 * its output unchanged (JSON log lines), forwards Ctrl-C / SIGTERM to it so it can stop cleanly,
 * and exits with the reconciler's own exit code. The CLI never matches statements itself: one
 * implementation of the matching rules, whether run by a CronJob or by an operator.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { CommandSpec } from "./command.js";
import { EXIT_REFUSED, UsageError } from "./exit-codes.js";

/** The reconciler entry point, beside this CLI in dist/services/. */
export function reconcilerEntry(): string {
  return fileURLToPath(new URL("../reconciler/main.js", import.meta.url));
}

/** The environment the reconciler runs with (the CLI's env plus resolved endpoints). */
export function reconcilerEnv(input: {
  env: NodeJS.ProcessEnv;
  paydb: string;
  railProxies: readonly string[];
  dryRun: boolean;
  settlementWindowMs?: number;
  /** The operator's certificate: the one-shot reconciler calls the proxies as the operator. */
  tls?: { cert: string; key: string; ca?: string };
}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(input.env)) if (v !== undefined) out[k] = v;
  out.PAYDB_URL = input.paydb;
  out.RAIL_PROXY_URLS = input.railProxies.join(",");
  out.RECONCILE_INTERVAL_MS = "0";
  // Explicit either way: an inherited RECONCILER_DRY_RUN must not silently decide for the operator.
  out.RECONCILER_DRY_RUN = input.dryRun ? "true" : "false";
  if (input.settlementWindowMs !== undefined) out.SETTLEMENT_WINDOW_MS = String(input.settlementWindowMs);
  // A one-shot run must not collide with a reconciler already bound to the default metrics port.
  out.METRICS_PORT ??= "0";
  if (input.tls) {
    out.TLS_CERT_FILE = input.tls.cert;
    out.TLS_KEY_FILE = input.tls.key;
    if (input.tls.ca) out.TLS_CA_FILE = input.tls.ca;
  }
  return out;
}

const reconcile: CommandSpec = {
  words: ["reconcile"],
  usage: "reconcile [--dry-run] [--settlement-window-ms MS] [--paydb URL] [--rail-proxy URL ...]",
  summary: "run the reconciler once against the resolved paydb and rail-proxies, streaming its output",
  details: [
    "--dry-run                  report what would be resolved; change nothing",
    "--settlement-window-ms MS  passed to the reconciler as SETTLEMENT_WINDOW_MS",
    "needs paydb (--paydb, RAILFENCE_PAYDB_URL or the endpoints file); the password, if any, via PAYDB_PASSWORD_FILE",
    "exits with the reconciler's exit code (0 ok, 78 bad config, 70 start-up failure)",
  ],
  options: ["dry-run", "settlement-window-ms"],
  positionals: 0,
  async run(ctx) {
    const paydb = ctx.endpoints.paydb?.value;
    if (!paydb) throw new UsageError("reconcile needs paydb: pass --paydb URL, set RAILFENCE_PAYDB_URL, or run where .railfence/endpoints.json exists");
    const env = reconcilerEnv({
      env: ctx.env,
      paydb,
      railProxies: ctx.endpoints.railProxy?.value ?? [],
      dryRun: ctx.opts.flag("dry-run"),
      settlementWindowMs: ctx.opts.integer("settlement-window-ms", 0, 31 * 24 * 3_600_000),
      tls: ctx.endpoints.tls?.value,
    });
    const entry = reconcilerEntry();
    if (!existsSync(entry)) {
      ctx.output.err(`error: the reconciler is not built (${entry} is missing); run \`npm run build\``);
      return EXIT_REFUSED;
    }
    const child = spawn(process.execPath, [entry], { env, stdio: ["ignore", "inherit", "inherit"] });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.on("SIGINT", forward);
    process.on("SIGTERM", forward);
    try {
      const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
        child.once("error", reject);
        child.once("exit", (c, s) => resolve({ code: c, signal: s }));
      });
      if (code === null) {
        ctx.output.err(`error: the reconciler was stopped by ${signal ?? "a signal"}`);
        return EXIT_REFUSED;
      }
      return code;
    } finally {
      process.off("SIGINT", forward);
      process.off("SIGTERM", forward);
    }
  },
};

export const reconcileCommands: readonly CommandSpec[] = [reconcile];
