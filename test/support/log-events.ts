/**
 * Reading what a service process logged. A service writes a log line after the row or the
 * answer it describes (the executor records the payout, then logs the attempt), and the test
 * process reads the line from a pipe some time later still: a test that waited for the row must
 * then wait for the line too. These helpers wait for the very line they return.
 * HARNESS_LOG_DELAY_MS (tools/harness/service-process.ts) delays every line, to show it.
 */
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { eventually } from "./clients.js";

export type LogEvent = Record<string, unknown>;

/** Parsed JSON log lines of a process so far (non-JSON lines skipped). */
export function logEvents(p: ServiceProcess): LogEvent[] {
  const out: LogEvent[] = [];
  for (const line of p.lines) {
    try {
      out.push(JSON.parse(line) as LogEvent);
    } catch {
      // not a log line
    }
  }
  return out;
}

/** Waits (bounded) for the first log event that matches, and returns it. */
export function waitForLog(p: ServiceProcess, match: (e: LogEvent) => boolean, what: string, timeoutMs = 15_000): Promise<LogEvent> {
  return eventually(async () => logEvents(p).find(match), `${p.name} to log ${what}`, timeoutMs);
}

/** Waits (bounded) until the matching log events satisfy `enough`, and returns them all. */
export function waitForLogs(
  p: ServiceProcess,
  match: (e: LogEvent) => boolean,
  enough: (events: LogEvent[]) => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<LogEvent[]> {
  return eventually(
    async () => {
      const events = logEvents(p).filter(match);
      return enough(events) ? events : undefined;
    },
    `${p.name} to log ${what}`,
    timeoutMs,
  );
}
