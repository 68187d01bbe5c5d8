/**
 * JSON logs (pino), one object per line, with the service name. Log each failure once, at the
 * boundary, with code, reason and duration; never whole requests, never secrets.
 */
import { isSpanContextValid, trace } from "@opentelemetry/api";
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({
    level,
    base: { service, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Every line logged inside a traced call carries its trace and span ids.
    mixin() {
      const ctx = trace.getActiveSpan()?.spanContext();
      return ctx && isSpanContextValid(ctx) ? { trace_id: ctx.traceId, span_id: ctx.spanId } : {};
    },
  });
}
