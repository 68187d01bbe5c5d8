/**
 * Process lifecycle: graceful, bounded shutdown on SIGTERM/SIGINT, and fatal start-up errors
 * reported as one JSON line with an explicit exit code.
 */
import type { Logger } from "../process/logger.js";
import { flushTelemetry } from "./telemetry.js";

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

export { flushTelemetry } from "./telemetry.js";

/** Runs main(); a ConfigError exits 78, anything else 70, each reported as one JSON line. */
export function runMain(logger: Logger, main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    const isConfig = err instanceof Error && err.name === "ConfigError";
    logger.fatal({ event: "startup_failed", error: err instanceof Error ? err.message : String(err) }, "start-up failed");
    process.exit(isConfig ? EXIT_CONFIG : EXIT_STARTUP);
  });
}

/**
 * A service started in process by its factory (`startRailProxy(config, deps)`, ...): what its
 * ready line says, and how to stop it. main.ts only reads the environment and wires signals, so a
 * test can start the same service in process with fakes, and the cross-process tests keep the
 * real processes.
 */
export interface RunningService {
  /** Fields of the `"event":"ready"` line (the ports first; 0 for a worker without an RPC port). */
  ready: { port: number; metricsPort: number } & Record<string, unknown>;
  /** How long close() may take before the process gives up (EXIT_DRAIN_TIMEOUT). */
  drainBoundMs: number;
  /** Graceful, bounded stop: in-flight work finishes, pools close. */
  close(): Promise<void>;
}

/** The whole of a service's main.ts: start it, log ready, drain on SIGTERM/SIGINT. */
export function runService(logger: Logger, start: () => Promise<RunningService>): void {
  runMain(logger, async () => {
    const service = await start();
    logger.info({ event: "ready", ...service.ready }, "ready");
    onShutdown(logger, service.drainBoundMs, () => service.close());
  });
}
