/**
 * RED metrics (rate, errors, duration) for every RPC a railfence server answers and every RPC a
 * railfence client makes (decision 058). One histogram per side carries all three: its `_count`
 * is the request rate, `_count{rpc_code!="ok"}` the error rate, its buckets the duration.
 *
 * - `railfence_rpc_server_duration_seconds{rpc_service,rpc_method,rpc_code}`: from the request's
 *   arrival to its answer, on both server paths (connect-node and the direct unary path: one
 *   interceptor serves both), calls refused before their handler (the request gate, an unknown
 *   path) included.
 * - `railfence_rpc_client_duration_seconds{rpc_service,rpc_method,rpc_code}`: from the call to its
 *   outcome, transport failures included (a refused connection is `unavailable`, a deadline
 *   `deadline_exceeded`): the caller's view, which a server cannot see.
 *
 * Labels stay bounded: service and method names come from the protobuf descriptors only (a path
 * no service here implements is `rpc_method="unknown"`, and `rpc_service="unknown"` when its
 * service is not one of ours either), codes from the 17 Connect codes. grpc.health.v1 is not
 * measured: probes every few seconds would outnumber the work, and Watch is a subscription whose
 * "duration" is how long the watcher stayed. `component` comes from the registry (metrics.ts).
 */
import { Code, ConnectError, createContextKey, type ContextValues, type Interceptor, type StreamResponse } from "@connectrpc/connect";
import { Histogram, type Registry } from "prom-client";

/**
 * Seconds. From 1 ms (a lock call, a cached read) to 120 s: the longest deadline a railfence
 * server accepts (LIMITS.maxTimeoutMs; its own call bound is 90 s) and the ceiling of every
 * configured client deadline (RAIL_DEADLINE_MS, CALL_TIMEOUT_MS), so a call that ran into its
 * deadline lands in a finite bucket, not only in +Inf. rpc-metrics.test.ts checks that.
 */
export const RPC_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120] as const;

/** The Connect protocol's code names (lower snake case; gRPC's CANCELLED is spelled `canceled`). */
const CODE_NAMES: Readonly<Record<Code, string>> = {
  [Code.Canceled]: "canceled",
  [Code.Unknown]: "unknown",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss",
  [Code.Unauthenticated]: "unauthenticated",
};

/** The `rpc_code` of an outcome: "ok", or the code's name ("unknown" for anything not a code). */
export function rpcCodeName(code: Code | 0): string {
  return code === 0 ? "ok" : (CODE_NAMES[code] ?? "unknown");
}

/** The `rpc_code` of a thrown value, as Connect would send it. */
export function rpcCodeOf(err: unknown): string {
  return rpcCodeName(ConnectError.from(err).code);
}

/** Not measured: kubelet and load-balancer probes (see the file comment). */
const UNMEASURED_SERVICES = new Set(["grpc.health.v1.Health"]);

export const UNKNOWN = "unknown";

const SERVER_METRIC = "railfence_rpc_server_duration_seconds";
const SERVER_HELP = "RPCs answered by this server, by outcome (rpc_code; _count is the request rate)";
const CLIENT_METRIC = "railfence_rpc_client_duration_seconds";
const CLIENT_HELP = "RPCs this process made to another, by outcome (rpc_code; transport failures included)";

type RpcHistogram = Histogram<"rpc_service" | "rpc_method" | "rpc_code">;

// One histogram per registry: a process may run several servers on one (rail-stub and its control API).

function serverHistogram(registry: Registry): RpcHistogram {
  const existing = registry.getSingleMetric(SERVER_METRIC);
  if (existing) return existing as RpcHistogram;
  return new Histogram({
    name: SERVER_METRIC,
    help: SERVER_HELP,
    labelNames: ["rpc_service", "rpc_method", "rpc_code"] as const,
    buckets: [...RPC_DURATION_BUCKETS],
    registers: [registry],
  });
}

function clientHistogram(registry: Registry): RpcHistogram {
  const existing = registry.getSingleMetric(CLIENT_METRIC);
  if (existing) return existing as RpcHistogram;
  return new Histogram({
    name: CLIENT_METRIC,
    help: CLIENT_HELP,
    labelNames: ["rpc_service", "rpc_method", "rpc_code"] as const,
    buckets: [...RPC_DURATION_BUCKETS],
    registers: [registry],
  });
}

/** When the request arrived (performance.now()), set by the server before the gate reads its body. */
export const callStartedKey = createContextKey<number | undefined>(undefined, { description: "railfence call arrival" });

/** Times a call (unary, or a response stream until its end) and records its outcome. */
function timed(observe: (code: string, seconds: number) => void, started: number): Interceptor {
  const done = (code: string) => observe(code, (performance.now() - started) / 1000);
  return (next) => async (req) => {
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (err) {
      done(rpcCodeOf(err));
      throw err;
    }
    if (!res.stream) {
      done("ok");
      return res;
    }
    const message = res.message;
    return {
      ...res,
      message: (async function* () {
        let code = "canceled"; // the reader stopped early (its caller left): recorded as Connect would answer
        try {
          yield* message;
          code = "ok";
        } catch (err) {
          code = rpcCodeOf(err);
          throw err;
        } finally {
          done(code);
        }
      })(),
    } as StreamResponse;
  };
}

/** What a server records: handled calls (an interceptor) and calls refused before any handler. */
export interface ServerRpcMetrics {
  /** Outermost interceptor of both server paths; sees the final, client-visible code. */
  interceptor: Interceptor;
  /**
   * A call that never reached a handler: refused by the gate, for an unknown path, or given up by
   * its client while its body was still arriving (`canceled`).
   */
  refused(service: string, method: string, code: string, started: number): void;
}

export function serverRpcMetrics(registry: Registry): ServerRpcMetrics {
  const h = serverHistogram(registry);
  const record = (service: string, method: string) => (code: string, seconds: number) =>
    h.observe({ rpc_service: service, rpc_method: method, rpc_code: code }, seconds);
  return {
    interceptor: (next) => (req) => {
      const service = req.service.typeName;
      if (UNMEASURED_SERVICES.has(service)) return next(req);
      const started = req.contextValues.get(callStartedKey) ?? performance.now();
      return timed(record(service, req.method.name), started)(next)(req);
    },
    refused(service, method, code, started) {
      if (UNMEASURED_SERVICES.has(service)) return;
      record(service, method)(code, (performance.now() - started) / 1000);
    },
  };
}

/**
 * The labels of a request path (`/pkg.Service/Method`) that no handler serves: the service's name
 * when it is one of `known`, the method always "unknown" (a path is whatever a client sent).
 */
export function unknownPathLabels(path: string, known: ReadonlySet<string>): { service: string; method: string } {
  const service = path.split("/")[1] ?? "";
  return { service: known.has(service) ? service : UNKNOWN, method: UNKNOWN };
}

/** Marks a call's arrival in its context values (read by the server interceptor). */
export function markArrival(values: ContextValues, started: number): ContextValues {
  return values.set(callStartedKey, started);
}

/** Client side: every call through a service transport (client-transport.ts), transport failures included. */
export function clientRpcMetrics(registry: Registry): Interceptor {
  const h = clientHistogram(registry);
  return (next) => (req) => {
    const service = req.service.typeName;
    const method = req.method.name;
    return timed((code, seconds) => h.observe({ rpc_service: service, rpc_method: method, rpc_code: code }, seconds), performance.now())(next)(req);
  };
}
