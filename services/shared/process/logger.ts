/**
 * JSON logs (pino), one object per line, with the service name. Log each failure once, at the
 * boundary, with code, reason and duration; never whole requests, never secrets.
 */
import { isSpanContextValid, trace } from "@opentelemetry/api";
import { pino, type Logger } from "pino";
import { currentCall } from "./call-context.js";

export type { Logger };

export function createLogger(service: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({
    level,
    base: { service, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Every line logged inside a served call carries its trace id (the span's when tracing runs)
    // and the caller's request id (call-context.ts, decision 054).
    mixin() {
      const ctx = trace.getActiveSpan()?.spanContext();
      const call = currentCall();
      const ids: Record<string, string> = ctx && isSpanContextValid(ctx) ? { trace_id: ctx.traceId, span_id: ctx.spanId } : {};
      if (!ids.trace_id && call) ids.trace_id = call.traceId;
      if (call?.requestId !== undefined) ids.request_id = call.requestId;
      return ids;
    },
  });
}
