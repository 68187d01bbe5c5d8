/**
 * The direct unary gRPC path (services/shared/rpc/grpc-unary-server.ts and grpc-unary-client.ts,
 * decision 006) interoperates, and answers exactly as connect-node did:
 *
 * - server side: a real rail-proxy answers a plain @grpc/grpc-js client, connect-node's own gRPC
 *   client, a Connect JSON client and `buf curl --protocol grpc` with the same code and ErrorInfo
 *   reason, and pays a fenced payout for each gRPC client; a replica started with
 *   RAILFENCE_CONNECT_UNARY=1 (connect-node serving every call) gives the same answers;
 * - client side: railfence's transport against a @grpc/grpc-js server (another stack): the
 *   message, a status with ErrorInfo details, the deadline, cancellation, a server that vanishes
 *   mid-call and one that is not there. A connection that breaks is never read as a refusal.
 */
import { execFile } from "node:child_process";
import http2 from "node:http2";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { anyPack, anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { sendGateContext } from "../../services/shared/rpc/send-gate.js";
import { createUnaryGrpcTransport } from "../../services/shared/rpc/grpc-unary-client.js";
import { grpcFrame } from "../../services/shared/rpc/grpc-wire.js";
import { ErrorInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../services/shared/gen/google/rpc/status_pb.js";
import {
  Health,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import {
  RailProxyService,
  SubmissionState,
  SubmitPayoutRequestSchema,
  SubmitPayoutResponseSchema,
} from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { connectClient, db, eventually, expectRejected } from "../support/clients.js";
import { startSlowAcceptRelay } from "../support/slow-accept-relay.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";
import { grpcJsHealthCheck } from "../support/grpc-js-health.js";
import { quietFor } from "../support/time.js";

const run = promisify(execFile);
const buf = join(projectRoot(), "node_modules", ".bin", "buf");
const SUBMIT = "/railfence.railproxy.v1.RailProxyService/SubmitPayout";

let mesh: Mesh;
let paydb: pg.Client;
let connectOnly: ServiceProcess;
let seq = 0;
const uid = (p: string) => `${p}-${Date.now().toString(36)}-${++seq}`;
const request = (accountId: string, payoutId: string, token: bigint) => ({
  accountId,
  payoutId,
  fencingToken: token,
  amount: { amountMinor: 1200n, currency: "EUR" },
  beneficiary: "ben-007",
});

beforeAll(async () => {
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
  connectOnly = await mesh.addProxy({ RAILFENCE_CONNECT_UNARY: "1" });
  paydb = await db(mesh.dbUrl("paydb"));
});

afterAll(async () => {
  await paydb?.end();
  await mesh?.stop();
});

/** SubmitPayout from a plain grpc-js client; resolves with the answer or the ServiceError. */
function grpcJsSubmit(port: number, req: ReturnType<typeof request>): Promise<{ ok?: Buffer; err?: grpc.ServiceError }> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const body = Buffer.from(toBinary(SubmitPayoutRequestSchema, create(SubmitPayoutRequestSchema, req)));
  return new Promise((resolve) =>
    client.makeUnaryRequest(
      SUBMIT,
      (b: Buffer) => b,
      (b: Buffer) => b,
      body,
      (err, ok) => {
        client.close();
        resolve(err ? { err } : { ok });
      },
    ),
  );
}

function grpcJsReason(err: grpc.ServiceError): string | undefined {
  const bin = err.metadata.get("grpc-status-details-bin")[0] as Buffer | undefined;
  if (!bin) return undefined;
  return fromBinary(StatusSchema, bin)
    .details.map((d) => anyUnpack(d, ErrorInfoSchema))
    .find(Boolean)?.reason;
}

async function bufCurl(url: string, body: object): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(
      buf,
      ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--schema", projectRoot(), "--data", JSON.stringify(body), `${url}${SUBMIT}`],
      { timeout: 30_000 },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

describe("server side: a rail-proxy serving unary gRPC directly", () => {
  const proxies = () => [
    { name: "direct", p: mesh.proxies[0]! },
    { name: "connect-node only", p: connectOnly },
  ];

  it("answers a refusal with the same code and reason to every client, on both layouts", async () => {
    for (const { name, p } of proxies()) {
      const bad = request(uid("acc"), uid("p"), 0n);
      const fromGrpcJs = await grpcJsSubmit(p.ready!.port, bad);
      expect(fromGrpcJs.err?.code, name).toBe(grpc.status.INVALID_ARGUMENT);
      expect(grpcJsReason(fromGrpcJs.err!), name).toBe("TOKEN_INVALID");
      for (const protocol of ["grpc", "connect-json"] as const) {
        await expectRejected(connectClient(RailProxyService, p.url, { protocol }).submitPayout(bad), Code.InvalidArgument, "TOKEN_INVALID");
      }
      const direct = createClient(RailProxyService, railfenceTransport(p.url));
      await expectRejected(direct.submitPayout(bad), Code.InvalidArgument, "TOKEN_INVALID");
      const curl = await bufCurl(p.url, { accountId: "acc-1", payoutId: "p-1", fencingToken: "0" });
      expect(curl.code, `${name}: ${curl.stderr}`).not.toBe(0);
      // buf curl prints the status as JSON, each detail's bytes in base64.
      const status = JSON.parse(curl.stderr.slice(curl.stderr.indexOf("{"))) as { code: string; details: Array<{ type: string; value: string }> };
      expect(status.code, name).toBe("invalid_argument");
      const info = status.details.find((d) => d.type === "google.rpc.ErrorInfo");
      expect(fromBinary(ErrorInfoSchema, Buffer.from(info!.value, "base64")).reason, name).toBe("TOKEN_INVALID");
    }
  });

  it("pays a fenced payout for a grpc-js client, connect-node's gRPC client and railfence's own", async () => {
    for (const { name, p } of proxies()) {
      const viaGrpcJs = await grpcJsSubmit(p.ready!.port, await fencedFor(paydb, request(uid("acc"), uid("p"), 5n)));
      expect(viaGrpcJs.err, name).toBeUndefined();
      expect(fromBinary(SubmitPayoutResponseSchema, viaGrpcJs.ok!).submission?.state, name).toBe(SubmissionState.ACCEPTED);
      const viaConnect = await connectClient(RailProxyService, p.url).submitPayout(await fencedFor(paydb, request(uid("acc"), uid("p"), 6n)));
      expect(viaConnect.submission?.state, name).toBe(SubmissionState.ACCEPTED);
      const viaOwn = await createClient(RailProxyService, railfenceTransport(p.url)).submitPayout(await fencedFor(paydb, request(uid("acc"), uid("p"), 7n)));
      expect(viaOwn.submission?.state, name).toBe(SubmissionState.ACCEPTED);
    }
  });

  it("serves gRPC directly only where it is on: connect-node negotiates response compression, the direct path answers uncompressed", async () => {
    // The response headers of a paid SubmitPayout whose caller offers gzip, as a raw HTTP/2 client sees them.
    const responseHeaders = async (url: string) => {
      const body = grpcFrame(toBinary(SubmitPayoutRequestSchema, create(SubmitPayoutRequestSchema, await fencedFor(paydb, request(uid("acc"), uid("p"), 3n)))));
      const session = http2.connect(url);
      try {
        return await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
          const stream = session.request({
            ":method": "POST",
            ":path": SUBMIT,
            "content-type": "application/grpc",
            te: "trailers",
            "grpc-accept-encoding": "gzip",
          });
          stream.on("response", resolve);
          stream.on("error", reject);
          stream.resume();
          stream.end(body);
        });
      } finally {
        session.close();
      }
    };
    expect((await responseHeaders(mesh.proxies[0]!.url))["grpc-encoding"]).toBeUndefined();
    expect((await responseHeaders(connectOnly.url))["grpc-encoding"]).toBe("gzip");
  });
});

/** railfence's own client transport, as client-transport.ts builds it (h2c, no interceptors). */
function railfenceTransport(baseUrl: string, extra: { connectTimeoutMs?: number; unguardedSend?: boolean; pingIntervalMs?: number } = {}) {
  const options = { baseUrl, interceptors: [], pingIntervalMs: 30_000, idleConnectionTimeoutMs: 5_000, ...extra };
  return createUnaryGrpcTransport(options, createGrpcTransport(options));
}

describe("client side: railfence's transport against a @grpc/grpc-js server", () => {
  let server: grpc.Server;
  let port = 0;
  /** What the server does with the next Check: its `service` field says. */
  /** Calls the "hang" behaviour has received (and never answers). */
  let hanging = 0;
  const behaviours: Record<
    string,
    (call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, done: grpc.sendUnaryData<HealthCheckResponse>) => void
  > = {
    ok: (_c, done) => done(null, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING })),
    refuse: (_c, done) => {
      const info = create(ErrorInfoSchema, { reason: "SOMETHING_REFUSED", domain: "railfence.dev", metadata: { field: "x" } });
      const status = create(StatusSchema, { code: grpc.status.FAILED_PRECONDITION, message: "refused", details: [anyPack(ErrorInfoSchema, info)] });
      const md = new grpc.Metadata();
      md.set("grpc-status-details-bin", Buffer.from(toBinary(StatusSchema, status)));
      done({ code: grpc.status.FAILED_PRECONDITION, details: "refused", metadata: md });
    },
    slow: (_c, done) => setTimeout(() => done(null, create(HealthCheckResponseSchema, {})), 3000),
    hang: () => {
      hanging++;
    },
  };

  beforeAll(async () => {
    server = new grpc.Server();
    const check = grpcJsHealthCheck;
    server.addService(
      { check },
      {
        check: (call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, done: grpc.sendUnaryData<HealthCheckResponse>) =>
          behaviours[call.request.service]!(call, done),
      },
    );
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
  });

  afterAll(() => server?.forceShutdown());

  const client = () => createClient(Health, railfenceTransport(`http://127.0.0.1:${port}`));

  it("reads the message", async () => {
    expect((await client().check({ service: "ok" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it("reads a status with its ErrorInfo details", async () => {
    const err = await expectRejected(client().check({ service: "refuse" }), Code.FailedPrecondition, "SOMETHING_REFUSED");
    expect(errorInfo(err)?.metadata).toEqual({ field: "x" });
    expect(err.rawMessage).toBe("refused");
  });

  it("gives up at its deadline with deadline_exceeded, and cancels with canceled", async () => {
    await expectRejected(client().check({ service: "slow" }, { timeoutMs: 200 }), Code.DeadlineExceeded);
    const abort = new AbortController();
    const call = client().check({ service: "hang" }, { signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    await expectRejected(call, Code.Canceled);
  });

  it("asks a send gate at the last moment: a refusal writes nothing (the server never sees the call), a pass reports the write", async () => {
    let seen = 0;
    behaviours.count = (_c, done) => {
      seen++;
      done(null, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING }));
    };
    const c = client();
    const events: string[] = [];
    const refused = c.check(
      { service: "count" },
      { contextValues: sendGateContext({ beforeSend: () => (events.push("asked"), "budget passed"), sent: () => events.push("sent") }) },
    );
    const err = await expectRejected(refused, Code.Aborted);
    expect(err.rawMessage).toBe("budget passed");
    expect(events).toEqual(["asked"]);
    expect(seen).toBe(0);
    const passed = await c.check(
      { service: "count" },
      { contextValues: sendGateContext({ beforeSend: () => (events.push("asked"), undefined), sent: () => events.push("sent") }) },
    );
    expect(passed.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect(events).toEqual(["asked", "asked", "sent"]);
    expect(seen).toBe(1);
  });

  it("asks the gate only once the connection is made: against a server slow to accept, a connect past its bound fails with nothing sent", async () => {
    const relay = await startSlowAcceptRelay(port, "slow-connect-[a-z]+");
    try {
      const events: string[] = [];
      const gate = (name: string) =>
        sendGateContext({
          beforeSend: () => (events.push(`${name}:asked`), undefined),
          sent: () => events.push(`${name}:sent`),
          unsent: () => events.push(`${name}:unsent`),
        });
      // Not connected within 300 ms: Unavailable, the gate never asked, the attempt aborted.
      const c = createClient(Health, railfenceTransport(`http://127.0.0.1:${relay.port}`, { connectTimeoutMs: 300 }));
      await expectRejected(c.check({ service: "slow-connect-first" }, { contextValues: gate("first") }), Code.Unavailable);
      expect(events).toEqual(["first:unsent"]);
      // Once the server accepts, the next call connects, is asked, and is written.
      await relay.release();
      behaviours["slow-connect-next"] = (_c, done) => done(null, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING }));
      await c.check({ service: "slow-connect-next" }, { contextValues: gate("next") });
      expect(events).toEqual(["first:unsent", "next:asked", "next:sent"]);
      // The first request never leaves: its connection attempt was aborted.
      await quietFor(3500, "the kernel's SYN retransmissions (1 and 3 s): none may carry the first request");
      expect(relay.seen).toEqual(["slow-connect-next"]);
      expect(relay.accepted).toBe(1);
    } finally {
      await relay.stop();
    }
  }, 30_000);

  it("negative control: the transport as it was (unguardedSend) asks the gate while connecting and writes the request whenever it connects", async () => {
    const relay = await startSlowAcceptRelay(port, "slow-connect-[a-z]+");
    try {
      const events: string[] = [];
      const c = createClient(Health, railfenceTransport(`http://127.0.0.1:${relay.port}`, { unguardedSend: true }));
      behaviours["slow-connect-queued"] = (_c, done) => done(null, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING }));
      const call = c.check(
        { service: "slow-connect-queued" },
        { timeoutMs: 300, contextValues: sendGateContext({ beforeSend: () => (events.push("asked"), undefined), sent: () => events.push("sent") }) },
      );
      await expectRejected(call, Code.DeadlineExceeded);
      expect(events).toEqual(["asked"]);
      await relay.release();
      // The deadline closed the stream long ago; the request leaves anyway once the socket connects.
      await eventually(async () => relay.seen.includes("slow-connect-queued"), "the queued request to leave after its deadline", 15_000);
    } finally {
      await relay.stop();
    }
  }, 30_000);

  /** True when the call was answered (a check that a loaded machine may need to repeat). */
  const answered = (call: Promise<unknown>) =>
    call.then(
      () => true,
      () => false,
    );

  /**
   * A client through a relay to the server, one call answered on it, then the path frozen (a
   * partition: nothing relayed either way, the connection open). PINGs every `pingIntervalMs`.
   */
  async function clientOnFrozenPath(pingIntervalMs: number) {
    const relay = await startSlowAcceptRelay(port, "frozen-[a-z]+");
    await relay.release();
    const c = createClient(Health, railfenceTransport(`http://127.0.0.1:${relay.port}`, { pingIntervalMs }));
    behaviours["frozen-warm"] = (_c, done) => done(null, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING }));
    // (With a 200 ms PING on a loaded machine a connection may be reset during the call: retried.)
    await eventually(async () => answered(c.check({ service: "frozen-warm" })), "a first call", 10_000);
    await relay.freeze();
    return { relay, c };
  }

  it("a connection that stops answering PINGs is reset within two intervals: a call on it ends, and the next call opens a new one", async () => {
    // (What an RST takes back is only what the sender's kernel still held; on loopback the peer's
    // kernel acknowledges at once, so what was delivered before the freeze cannot be recalled here.)
    const { relay, c } = await clientOnFrozenPath(200);
    try {
      const connections = relay.accepted;
      const started = Date.now();
      const err = await c.check({ service: "frozen-held" }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      // No deadline on the call: only the PING watchdog ends it (the second tick, or the third;
      // bounded generously here, a loaded machine runs late, and the control below waits as long).
      expect(err, "the call must end when its connection is reset").toBeDefined();
      expect(Date.now() - started).toBeLessThan(3000);
      await relay.thaw();
      await eventually(async () => answered(c.check({ service: "frozen-warm" })), "a call on a new connection", 10_000);
      // (The relay reports each connection on its own output: waited for, not read at once.)
      await eventually(async () => relay.accepted > connections, "the reset connection to be replaced by a new one", 10_000);
    } finally {
      await relay.stop();
    }
  }, 30_000);

  it("negative control: with no PING within the test's time the same frozen call does not end: the watchdog is what ends it", async () => {
    const { relay, c } = await clientOnFrozenPath(60_000);
    try {
      const abort = new AbortController();
      const call = c.check({ service: "frozen-held" }, { signal: abort.signal }).then(
        () => "answered",
        () => "ended",
      );
      const outcome = await Promise.race([call, new Promise((r) => setTimeout(() => r("still waiting"), 3000))]);
      expect(outcome).toBe("still waiting");
      abort.abort();
      await call;
    } finally {
      await relay.stop();
    }
  }, 30_000);

  it("never reads a broken connection as a refusal: a server that vanishes mid-call, one that is not there", async () => {
    // The codes the proxy reads as "the rail refused before booking" (admission.ts RAIL_REFUSALS).
    const refusals = [Code.InvalidArgument, Code.Unauthenticated, Code.PermissionDenied].map((c) => Code[c]);
    const c = client();
    const before = hanging;
    const call = c.check({ service: "hang" }).catch((e: unknown) => ConnectError.from(e));
    await eventually(() => hanging > before, "the server to hold the call");
    server.forceShutdown();
    const cut = await call;
    expect(cut).toBeInstanceOf(ConnectError);
    expect(refusals).not.toContain(Code[(cut as ConnectError).code]);
    expect(errorInfo(cut as ConnectError)).toBeUndefined();
    const gone = await c.check({ service: "ok" }).catch((e: unknown) => ConnectError.from(e));
    expect(Code[(gone as ConnectError).code]).toBe(Code[Code.Unavailable]);
  });
});
