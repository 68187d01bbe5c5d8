/**
 * The request listener every railfence server runs: connect-node's router and handlers behind
 * request-gate.ts. It replaces connectNodeAdapter (connect-node's own listener), which reads and
 * decodes the body inside the framework, before any interceptor, with no read deadline and with
 * decoder errors answered `internal`. Here the gate reads the body first (deadline, size,
 * framing, strict decoding) and connect-node receives only a complete, well-formed message; its
 * handler, interceptors and response writing are unchanged.
 */
import type http2 from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, createConnectRouter, createContextValues, type ConnectRouter, type ConnectRouterOptions, type ContextValues } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { callIdsFor, runInCall, stampResponses } from "../process/call-context.js";
import { errorInfo, errorReason } from "../domain/errors.js";
import type { Logger } from "../process/logger.js";
import { admitRequest, methodNotFound, type GateLimits, type Refusal } from "./request-gate.js";
import { writeRefusal } from "../rpc/refusal.js";
import { formatClientTimeout, requestProtocol } from "../rpc/wire-protocol.js";
import { checkedRequestStream } from "./request-stream.js";
import { createUnaryServer, recordUnaryImpls, servedDirectly } from "../rpc/grpc-unary-server.js";
import { markArrival, rpcCodeName, unknownPathLabels, type ServerRpcMetrics } from "../observability/rpc-metrics.js";

export interface GatedAdapterOptions extends ConnectRouterOptions {
  routes: (router: ConnectRouter) => void;
  limits: GateLimits;
  logger: Logger;
  contextValues?: (req: http2.Http2ServerRequest) => ContextValues;
  /**
   * Unary gRPC calls with protobuf bodies skip connect-node's pipeline (grpc-unary-server.ts):
   * same implementations, same interceptors, same answers. Default: on; the process config's
   * rpcStack (RAILFENCE_CONNECT_UNARY) turns it off (the bench compares the two).
   */
  directUnary?: boolean;
  /**
   * Per-call RED metrics (rpc-metrics.ts): its interceptor runs outermost on both paths, and calls
   * refused here, before any handler, are counted under their code.
   */
  rpcMetrics?: ServerRpcMetrics;
}

/** An http2 "request" listener serving the routes through the gate. */
export function gatedConnectAdapter(opts: GatedAdapterOptions): (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void {
  const metrics = opts.rpcMetrics;
  const interceptors = [...(metrics ? [metrics.interceptor] : []), ...(opts.interceptors ?? [])];
  const router = createConnectRouter({ ...opts, interceptors });
  const direct = recordUnaryImpls(router, opts.routes);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  const servedServices = new Set(router.handlers.map((h) => h.service.typeName));
  const serveDirect = !(opts.directUnary ?? true) ? undefined : createUnaryServer(interceptors, opts.shutdownSignal ?? new AbortController().signal);

  const refuse = (req: http2.Http2ServerRequest, refusal: Refusal, procedure: string, labels: { service: string; method: string }, started: number) => {
    writeRefusal(req.stream, refusal.error, refusal.protocol, refusal.httpStatus);
    metrics?.refused(labels.service, labels.method, rpcCodeName(refusal.error.code), started);
    // Logged once here, as the boundary interceptor logs handler refusals (no request data).
    opts.logger.info(
      {
        event: "rpc_refused",
        procedure,
        code: Code[refusal.error.code],
        reason: errorReason(refusal.error),
        problem: errorInfo(refusal.error)?.metadata.problem,
      },
      "call refused before its handler",
    );
  };

  // Every call runs with its ids (call-context.ts): each answer carries them, each log line too.
  return (req, res) => {
    const ids = callIdsFor(req.headers);
    stampResponses(req.stream, ids);
    runInCall(ids, () => serve(req, res));
  };

  function serve(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void {
    const started = performance.now();
    const path = (req.url ?? "").split("?", 1)[0]!;
    const handler = handlers.get(path);
    if (!handler) return refuse(req, methodNotFound(req.headers), "(unknown)", unknownPathLabels(path, servedServices), started);
    const method: DescMethod = handler.method;
    // The call's context, stamped with its arrival: its duration includes reading the body.
    const contextValues = () => markArrival(opts.contextValues?.(req) ?? createContextValues(), started);
    if (method.methodKind === "bidi_streaming" || method.methodKind === "client_streaming") {
      // Streams of requests (gRPC reflection is the only one railfence serves) have no single body
      // to gate: connect-node reads them as they come, each message first checked as the gate
      // checks one (request-stream.ts), so a malformed one is invalid_argument, not internal.
      const protocol = requestProtocol(one(req.headers[":method"]), one(req.headers["content-type"]), true);
      const body = protocol?.enveloped
        ? checkedRequestStream(req, {
            input: method.input,
            binary: protocol.binary,
            encoding: one(req.headers[protocol.encodingHeader]),
            maxMessageBytes: opts.limits.maxMessageBytes,
          })
        : undefined;
      const uReq = universalRequestFromNodeRequest(req, res, body as never, contextValues());
      void handler(uReq)
        .then((uRes) => universalResponseToNodeResponse(uRes, res))
        .catch((err: unknown) =>
          opts.logger.debug({ event: "rpc_write_failed", procedure: path, error: err instanceof Error ? err.message : String(err) }, "response not delivered"),
        );
      return;
    }
    void admitRequest(req, req.headers, method, opts.limits)
      .then((outcome) => {
        if ("gone" in outcome) {
          // The client left while its body was arriving: a call all the same, cancelled.
          metrics?.refused(method.parent.typeName, method.name, rpcCodeName(Code.Canceled), started);
          return;
        }
        if ("refused" in outcome) return refuse(req, outcome.refused, path, { service: method.parent.typeName, method: method.name }, started);
        const { protocol, body, remainingMs, message } = outcome.admitted;
        const spec = serveDirect && servedDirectly(protocol) ? direct.get(path) : undefined;
        if (spec && serveDirect) {
          const authority = one(req.headers[":authority"]) ?? "localhost";
          return serveDirect({
            spec,
            stream: req.stream,
            response: res,
            headers: req.headers,
            url: `${one(req.headers[":scheme"]) ?? "http"}://${authority}${path}`,
            protocol,
            message,
            remainingMs,
            contextValues: contextValues(),
          });
        }
        // connect-node reads an async iterable for enveloped protocols and takes a Connect unary body as is.
        const uBody = protocol.enveloped ? oneChunk(body) : body;
        const uReq = universalRequestFromNodeRequest(req, res, uBody as never, contextValues());
        // The deadline runs from the request's arrival, not from the moment its body was complete.
        if (remainingMs !== undefined) uReq.header.set(protocol.timeoutHeader, formatClientTimeout(protocol.timeoutHeader, remainingMs));
        return handler(uReq).then((uRes) => universalResponseToNodeResponse(uRes, res));
      })
      .catch((err: unknown) => {
        // A write failure after the client left; nothing to answer any more.
        opts.logger.debug({ event: "rpc_write_failed", procedure: path, error: err instanceof Error ? err.message : String(err) }, "response not delivered");
      });
  }
}

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

async function* oneChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
