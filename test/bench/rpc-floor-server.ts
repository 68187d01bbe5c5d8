/**
 * One unary gRPC method (grpc.health.v1.Health/Check) served four ways, for the RPC floor
 * workload (B5): `node:http2` by hand (the transport's own floor), `@grpc/grpc-js`,
 * `@connectrpc/connect-node` (what railfence's services were built on), and railfence's own
 * listener (gated-adapter.ts: the request gate's read deadline, size limit and strict decoding,
 * then the direct unary gRPC path of decision 006; what every railfence server now runs).
 * Forked by rpc-floor.ts; prints nothing, sends its port to the parent.
 */
import http2 from "node:http2";
import { toBinary } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { grpcJsHealthCheck } from "../support/grpc-js-health.js";
import { gatedConnectAdapter } from "../../services/shared/edge/gated-adapter.js";
import { createLogger } from "../../services/shared/process/logger.js";
import {
  Health,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus,
  type HealthCheckResponse,
} from "../../services/shared/gen/grpc/health/v1/health_pb.js";

const SERVING = toBinary(HealthCheckResponseSchema, { $typeName: "grpc.health.v1.HealthCheckResponse", status: HealthCheckResponse_ServingStatus.SERVING });

function rawHttp2(): Promise<number> {
  const frame = Buffer.alloc(5 + SERVING.length);
  frame.writeUInt32BE(SERVING.length, 1);
  frame.set(SERVING, 5);
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.resume();
    stream.end(frame);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

function grpcJs(): Promise<number> {
  const server = new grpc.Server();
  const check = grpcJsHealthCheck;
  server.addService(
    { check },
    {
      check: (_call: unknown, done: grpc.sendUnaryData<HealthCheckResponse>) =>
        done(null, { $typeName: "grpc.health.v1.HealthCheckResponse", status: HealthCheckResponse_ServingStatus.SERVING }),
    },
  );
  return new Promise((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
  );
}

function connectNode(): Promise<number> {
  const handler = connectNodeAdapter({
    routes: (router) => router.rpc(Health.method.check, () => ({ status: HealthCheckResponse_ServingStatus.SERVING })),
  });
  const server = http2.createServer(handler);
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

function connectNodeGated(): Promise<number> {
  const handler = gatedConnectAdapter({
    routes: (router) => router.rpc(Health.method.check, () => ({ status: HealthCheckResponse_ServingStatus.SERVING })),
    limits: { maxMessageBytes: 16 * 1024, readTimeoutMs: 10_000, maxTimeoutMs: 120_000 },
    logger: createLogger("rpc-floor"),
  });
  const server = http2.createServer(handler);
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

const kinds = { "node-http2": rawHttp2, "grpc-js": grpcJs, "connect-node": connectNode, "railfence-gated": connectNodeGated } as const;
const kind = process.argv[2] as keyof typeof kinds;
process.send!(await kinds[kind]());
process.on("SIGTERM", () => process.exit(0));
