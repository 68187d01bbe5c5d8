/**
 * JSON logs (pino), one object per line, with the service name. Log each failure once, at the
 * boundary, with code, reason and duration; never whole requests, never secrets.
 */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({
    level,
    base: { service, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
