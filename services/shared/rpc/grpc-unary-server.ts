/**
 * The direct path for unary gRPC calls with protobuf bodies: the money path's protocol, and every
 * service-to-service call in railfence. connect-node runs each unary call through an
 * async-iterable pipeline, three AbortControllers (two aborted on success, each building a
 * DOMException) and web Headers conversions; measured, that was most of the rail-proxy's CPU per
 * submission (docs/benchmarks.md, decision 006). Here a call the gate has already read and decoded
 * (request-gate.ts: deadline, size, framing, strict decoding) goes straight to the same method
 * implementation, through the same interceptors (tracing, authorization, the boundary's error
 * mapping and log, the server's call bound), and its answer is written as one gRPC response:
 * HEADERS, one length-prefixed message, trailers. An error is a trailers-only response written by
 * refusal.ts with connect's own status encoding, so its ErrorInfo reads the same as before.
 *
 * Everything else (Connect, gRPC-Web, JSON, streams) stays on connect-node, unchanged.
 */
import type http2 from "node:http2";
import { create, isMessage, toBinary, type DescMessage, type DescMethodUnary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { grpcFrame, webHeaders } from "./grpc-wire.js";
import { writeRefusal } from "./refusal.js";
import type { RequestProtocol } from "./wire-protocol.js";

type AnyImpl = (request: unknown, context: HandlerContext) => unknown;

/** One unary method's implementation, as registered on the router. */
export interface UnarySpec {
  method: DescMethodUnary;
  impl: AnyImpl;
}

/**
 * Runs `routes` against the real router and records, path by path, the implementation of every
 * unary method it registers, so the direct path calls exactly what connect-node would.
 */
export function recordUnaryImpls(router: ConnectRouter, routes: (router: ConnectRouter) => void): Map<string, UnarySpec> {
  const specs = new Map<string, UnarySpec>();
  const recording: ConnectRouter = {
    get handlers() {
      return router.handlers;
    },
    service(service, impl, options) {
      for (const method of service.methods) {
        const fn = (impl as Record<string, unknown>)[method.localName];
        if (method.methodKind === "unary" && typeof fn === "function") {
          specs.set(`/${service.typeName}/${method.name}`, { method: method as DescMethodUnary, impl: (fn as AnyImpl).bind(impl) });
        }
      }
      return router.service(service, impl, options);
    },
    rpc(method, impl, options) {
      if (method.methodKind === "unary") specs.set(`/${method.parent.typeName}/${method.name}`, { method: method as DescMethodUnary, impl: impl as AnyImpl });
      return router.rpc(method, impl as never, options);
    },
  };
  routes(recording);
  return specs;
}

export interface UnaryCall {
  spec: UnarySpec;
  stream: http2.ServerHttp2Stream;
  response: http2.Http2ServerResponse;
  headers: http2.IncomingHttpHeaders;
  url: string;
  protocol: RequestProtocol;
  /** The decoded request (request-gate.ts). */
  message: unknown;
  /** Time left of the client's deadline, if it set one. */
  remainingMs: number | undefined;
  contextValues: ContextValues;
}

const DEADLINE = () => new ConnectError("the operation timed out", Code.DeadlineExceeded);
const CANCELLED = () => new ConnectError("the call was cancelled", Code.Canceled);

/** The request's own headers as the interceptors and handlers read them. */
function requestHeaders(headers: http2.IncomingHttpHeaders, remainingMs: number | undefined): Headers {
  const h = webHeaders(headers);
  // The deadline runs from the request's arrival, as on connect-node's path (gated-adapter.ts).
  if (remainingMs !== undefined) h.set("grpc-timeout", `${Math.max(0, Math.floor(remainingMs))}m`);
  return h;
}

/**
 * Serves unary calls through `interceptors` (outermost first, as connect-node applies them).
 * `calls` tracks what is in flight, so a hard stop can abort every call's signal at once.
 */
export function createUnaryServer(interceptors: Interceptor[], shutdownSignal: AbortSignal) {
  const inFlight = new Set<AbortController>();
  shutdownSignal.addEventListener("abort", () => {
    for (const c of inFlight) c.abort(shutdownSignal.reason);
  });

  return function serve(call: UnaryCall): Promise<void> {
    const { spec, stream } = call;
    const method = spec.method;
    const service = method.parent;
    const controller = new AbortController();
    inFlight.add(controller);
    let answered = false;
    // The caller left (RST_STREAM, connection gone): the handler's signal says so.
    const onClose = () => {
      if (!answered) controller.abort(CANCELLED());
    };
    stream.once("close", onClose);
    const deadlineAt = call.remainingMs === undefined ? undefined : performance.now() + call.remainingMs;
    const timer = call.remainingMs === undefined ? undefined : setTimeout(() => controller.abort(DEADLINE()), Math.max(0, call.remainingMs));
    const responseHeader = new Headers();
    const responseTrailer = new Headers();
    const context: HandlerContext = {
      method,
      service,
      signal: controller.signal,
      timeoutMs: () => (deadlineAt === undefined ? undefined : deadlineAt - performance.now()),
      requestMethod: "POST",
      requestHeader: requestHeaders(call.headers, call.remainingMs),
      responseHeader,
      responseTrailer,
      protocolName: "grpc",
      values: call.contextValues,
      url: call.url,
    };
    const invoke = async (req: UnaryRequest): Promise<UnaryResponse> => {
      const out = await spec.impl(req.message, { ...context, requestHeader: req.header, signal: req.signal, values: req.contextValues });
      const message = isMessage(out, method.output) ? out : create(method.output as DescMessage, out as never);
      return { stream: false, service, method, header: responseHeader, trailer: responseTrailer, message, contextValues: req.contextValues } as UnaryResponse;
    };
    let next = invoke as (req: UnaryRequest) => Promise<UnaryResponse>;
    for (let i = interceptors.length - 1; i >= 0; i--) next = interceptors[i]!(next as never) as typeof next;
    const request = {
      stream: false,
      service,
      method,
      requestMethod: "POST",
      url: call.url,
      signal: controller.signal,
      header: context.requestHeader,
      contextValues: call.contextValues,
      message: call.message,
    } as UnaryRequest;

    const finish = () => {
      answered = true;
      clearTimeout(timer);
      inFlight.delete(controller);
      stream.off("close", onClose);
    };
    return next(request).then(
      (res) => {
        finish();
        writeAnswer(stream, call.response, res);
      },
      (err: unknown) => {
        finish();
        // The interceptors map every handler error to a ConnectError; anything else is ours.
        const error = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
        writeRefusal(stream, error, call.protocol);
      },
    );
  };
}

/**
 * Writes the answer through the compatibility response (the server was created with a request
 * listener, whose response object owns the stream's trailers: written on the stream directly,
 * they would race its own empty ones).
 */
function writeAnswer(stream: http2.ServerHttp2Stream, response: http2.Http2ServerResponse, res: UnaryResponse): void {
  if (stream.destroyed || stream.closed) return;
  let body: Buffer;
  try {
    body = grpcFrame(toBinary(res.method.output, res.message));
  } catch (err) {
    writeRefusal(stream, new ConnectError("internal error", Code.Internal, undefined, undefined, err), GRPC_PROTO);
    return;
  }
  const headers: http2.OutgoingHttpHeaders = { "content-type": "application/grpc+proto" };
  res.header.forEach((v, k) => {
    headers[k] = v;
  });
  const trailers: Record<string, string> = {};
  res.trailer.forEach((v, k) => {
    trailers[k] = v;
  });
  trailers["grpc-status"] = "0";
  response.writeHead(200, headers);
  response.addTrailers(trailers);
  response.end(body);
}

const GRPC_PROTO: RequestProtocol = { name: "grpc", binary: true, enveloped: true, timeoutHeader: "grpc-timeout", encodingHeader: "grpc-encoding" };

/** Is this admitted request one the direct path serves? gRPC with protobuf bodies only. */
export function servedDirectly(protocol: RequestProtocol): boolean {
  return protocol.name === "grpc" && protocol.binary;
}
