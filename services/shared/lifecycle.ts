/**
 * Process lifecycle: graceful, bounded shutdown on SIGTERM/SIGINT, and fatal start-up errors
 * reported as one JSON line with an explicit exit code.
 */
import type { Logger } from "./logger.js";

export const EXIT_OK = 0;
export const EXIT_CONFIG = 78; // EX_CONFIG
export const EXIT_STARTUP = 70; // EX_SOFTWARE
export const EXIT_DRAIN_TIMEOUT = 75; // EX_TEMPFAIL

/**
 * Runs stop() once on SIGTERM or SIGINT, then exits. If stop() takes longer than boundMs the
 * process exits anyway (EXIT_DRAIN_TIMEOUT) so an orchestrator never waits on a stuck drain.
 */
export function onShutdown(logger: Logger, boundMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handle = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    // The bound is armed before anything else can fail (a log write to a closed pipe, say).
    const timer = setTimeout(() => {
      safeLog(() => logger.error({ event: "shutdown_timeout", bound_ms: boundMs }, "drain bound exceeded"));
      process.exit(EXIT_DRAIN_TIMEOUT);
    }, boundMs);
    timer.unref();
    safeLog(() => logger.info({ event: "shutdown", signal }, "draining"));
    stop()
      .then(flushTelemetry)
      .then(
        () => {
          safeLog(() => logger.info({ event: "stopped" }, "stopped"));
          process.exit(EXIT_OK);
        },
        (err: unknown) => {
          safeLog(() => logger.error({ event: "shutdown_failed", err: String(err) }, "shutdown failed"));
          process.exit(EXIT_STARTUP);
        },
      );
  };
  process.on("SIGTERM", handle);
  process.on("SIGINT", handle);
}

/** Logging must never stop a shutdown (stdout may be a pipe whose reader is gone). */
function safeLog(write: () => void): void {
  try {
    write();
  } catch {
    // nothing to do: the exit still happens
  }
}

/**
 * Flushes spans (bounded) when the telemetry SDK was started by instrumentation.ts. Call it
 * before any process.exit: buffered spans die with the process (a CronJob run exports nothing).
 */
export async function flushTelemetry(): Promise<void> {
  const shutdown = (globalThis as { __railfenceTelemetryShutdown?: () => Promise<void> }).__railfenceTelemetryShutdown;
  if (!shutdown) return;
  await Promise.race([shutdown().catch(() => {}), new Promise((r) => setTimeout(r, 2000))]);
}

/** Runs main(); a ConfigError exits 78, anything else 70, each reported as one JSON line. */
export function runMain(logger: Logger, main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    const isConfig = err instanceof Error && err.name === "ConfigError";
    logger.fatal({ event: "startup_failed", error: err instanceof Error ? err.message : String(err) }, "start-up failed");
    process.exit(isConfig ? EXIT_CONFIG : EXIT_STARTUP);
  });
}
