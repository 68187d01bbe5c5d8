/**
 * W3C trace context across every Connect hop. node:http2 is not auto-instrumented, so these
 * interceptors do it: the client side starts a CLIENT span and injects `traceparent`/`tracestate`
 * into the request headers; the server side extracts them and runs the handler inside a SERVER
 * span, so pg queries and nested calls become its children. Attributes follow the RPC semantic
 * conventions, plus `railfence.*` attributes set by the handlers. Without a registered SDK the
 * API hands out non-recording spans: the cost is a few allocations per call.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { context, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from "@opentelemetry/api";
import { currentCall } from "../process/call-context.js";
import { errorReason } from "../domain/errors.js";
import { tracingOn } from "./telemetry.js";

const TRACER = "railfence";

/** Probes and schema reads are polling, not work: they get no spans (a quiet mesh would export
 * little else). */
const UNTRACED_SERVICES = new Set(["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]);

const headerSetter = { set: (h: Headers, k: string, v: string) => h.set(k, v) };
const headerGetter = {
  get: (h: Headers, k: string) => h.get(k) ?? undefined,
  keys: (h: Headers) => [...h.keys()],
};

function rpcAttributes(service: string, method: string): Attributes {
  return { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method };
}

function endWithError(span: Span, err: unknown): void {
  const ce = ConnectError.from(err);
  span.setAttribute("rpc.grpc.status_code", ce.code);
  const reason = errorReason(ce);
  if (reason) span.setAttribute("railfence.error_reason", reason);
  span.setStatus({ code: SpanStatusCode.ERROR, message: reason || Code[ce.code] });
}

/** Runs one RPC inside a span of `kind`, recording the gRPC status and any ErrorInfo reason. */
function rpcSpan<T>(kind: SpanKind, req: { service: { typeName: string }; method: { name: string } }, parent: Context, run: () => Promise<T>): Promise<T> {
  const service = req.service.typeName;
  const method = req.method.name;
  return trace.getTracer(TRACER).startActiveSpan(`${service}/${method}`, { kind, attributes: rpcAttributes(service, method) }, parent, async (span) => {
    try {
      const res = await run();
      span.setAttribute("rpc.grpc.status_code", 0);
      return res;
    } catch (err) {
      endWithError(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Client side: one CLIENT span per call, context injected into the request headers. */
export const clientTracing: Interceptor = (next) => async (req) => {
  if (!tracingOn()) return next(req);
  return rpcSpan(SpanKind.CLIENT, req, context.active(), () => {
    propagation.inject(context.active(), req.header, headerSetter);
    return next(req);
  });
};

/** Server side: the caller's context extracted, the handler run inside a SERVER span. */
export const serverTracing: Interceptor = (next) => async (req) => {
  if (!tracingOn() || UNTRACED_SERVICES.has(req.service.typeName)) return next(req);
  return rpcSpan(SpanKind.SERVER, req, propagation.extract(context.active(), req.header, headerGetter), () => {
    // The answer and the call's log lines name the span's trace (a new one when the caller sent none).
    const span = trace.getActiveSpan()?.spanContext();
    const call = currentCall();
    if (call && span) {
      call.traceId = span.traceId;
      call.spanId = span.spanId;
    }
    return next(req);
  });
};

/** Adds attributes to the current span (no-op without one). Never pass secrets or bodies. */
export function annotate(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** Runs fn inside an INTERNAL span (executor steps, admission transaction, ...). */
export async function inSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
  return trace.getTracer(TRACER).startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err instanceof Error ? { name: err.name, message: err.message } : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.name : "error" });
      throw err;
    } finally {
      span.end();
    }
  });
}

/** The W3C traceparent of the current context (stored on payout rows to join async work). */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** A context whose parent is the given traceparent (for work started from a stored row). */
export function contextFromTraceparent(traceparent: string | null | undefined) {
  if (!traceparent) return context.active();
  return propagation.extract(context.active(), { traceparent });
}
