/**
 * The process's telemetry state, in one place: whether instrumentation.ts started an SDK, and how
 * to flush it. instrumentation.ts (loaded with --import before the application) and the
 * application import this same module, so they share it without globals.
 */
let shutdown: (() => Promise<void>) | undefined;

/** Called once by instrumentation.ts after it started the SDK. */
export function telemetryStarted(stop: () => Promise<void>): void {
  shutdown = stop;
}

/** True once an SDK runs. Without one the interceptors step aside: even non-recording spans and
 * context switches cost measurable CPU per call (docs/benchmarks.md). */
export function tracingOn(): boolean {
  return shutdown !== undefined;
}

/**
 * Flushes spans (bounded). Call it before any process.exit: buffered spans die with the process
 * (a CronJob run would export nothing).
 */
export async function flushTelemetry(): Promise<void> {
  if (!shutdown) return;
  await Promise.race([shutdown().catch(() => {}), new Promise((r) => setTimeout(r, 2000))]);
}
