/**
 * OpenTelemetry propagation: every attempt runs in a CLIENT span and carries W3C trace context
 * (`traceparent`, `tracestate`) in its headers, through the propagator the application
 * registered with @opentelemetry/api. Without an SDK this costs a few allocations and sends
 * the caller's active context, if any; the library never starts an SDK itself.
 */
import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

const setter = { set: (h: Headers, k: string, v: string) => h.set(k, v) };

export const tracingInterceptor: Interceptor = (next) => async (req) => {
  const service = req.service.typeName;
  const method = req.method.name;
  return trace.getTracer("@railfence/client").startActiveSpan(
    `${service}/${method}`,
    { kind: SpanKind.CLIENT, attributes: { "rpc.system": "grpc", "rpc.service": service, "rpc.method": method } },
    async (span) => {
      propagation.inject(context.active(), req.header, setter);
      try {
        const res = await next(req);
        span.setAttribute("rpc.grpc.status_code", 0);
        return res;
      } catch (err) {
        const ce = ConnectError.from(err);
        span.setAttribute("rpc.grpc.status_code", ce.code);
        const reason = ce.findDetails(ErrorInfoSchema)[0]?.reason;
        if (reason) span.setAttribute("railfence.error_reason", reason);
        span.setStatus({ code: SpanStatusCode.ERROR, message: reason ?? String(ce.code) });
        throw err;
      } finally {
        span.end();
      }
    },
  );
};
