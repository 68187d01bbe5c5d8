/**
 * RED metrics per RPC (decision 058), on real processes: a rail-proxy and the rail stub behind it.
 * Calls that succeed and calls that fail with a known code move the server histogram's _count of
 * exactly that method and code by exactly the number of calls, on both server paths (gRPC binary:
 * the direct unary path; Connect JSON: connect-node); the rail-proxy's own calls to the rail move
 * its client histogram, a refused connection included. Negative controls: a refusal is counted
 * under its code and never under "ok", a call refused before the rail is reached moves no client
 * series, an unknown path is rpc_method="unknown", health checks are not measured. And a payout
 * through payouts, executor, lock and rail-proxy: every call the executor counted as a client, the
 * server it called counted too, one for one.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetRailStatementRequestSchema, RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { Health } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { ServerReflection } from "../../services/shared/gen/grpc/reflection/v1/reflection_pb.js";
import { grpcFrame } from "../../services/shared/rpc/grpc-wire.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { connectClient, eventually, expectRejected, railControl } from "../support/clients.js";
import { startFullMesh } from "../support/test-mesh.js";
import { parseExposition } from "./metric-scheme.js";

const SERVER = "railfence_rpc_server_duration_seconds";
const CLIENT = "railfence_rpc_client_duration_seconds";
const PROXY = "railfence.railproxy.v1.RailProxyService";
const RAIL = "railfence.rail.v1.RailService";

let mesh: Mesh;

/** Every sample of `family`_count on a metrics port, keyed `service/method/code`. */
async function counts(metricsPort: number, family: string): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${family}_count{`)) continue;
    const [key, value] = line.split(" ");
    const { samples } = parseExposition(`${key} ${value}\n`);
    const l = samples[0]!.labels;
    out.set(`${l.rpc_service}/${l.rpc_method}/${l.rpc_code}`, Number(value));
  }
  return out;
}

/** What moved between two scrapes (series that did not move are left out). */
function delta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of after) if (v !== (before.get(k) ?? 0)) out[k] = v - (before.get(k) ?? 0);
  return out;
}

/** One raw gRPC request (`body` as is) to `path`; resolves with the grpc-status it was answered. */
function rawGrpc(baseUrl: string, path: string, body: Uint8Array): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on("error", reject);
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers" });
    let status: string | undefined;
    const keep = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
    };
    req.on("response", keep);
    req.on("trailers", keep);
    req.on("data", () => {});
    req.on("close", () => {
      session.close();
      resolve(status);
    });
    req.on("error", () => {});
    req.end(body);
  });
}

const proxy = () => mesh.proxies[0]!;

beforeAll(async () => {
  mesh = await startFullMesh();
});

afterAll(async () => {
  await mesh?.stop();
});

describe("per-RPC RED metrics", () => {
  it("count each answered call once, under its method and code, on both server paths and on the calling side", async () => {
    const grpc = connectClient(RailProxyService, proxy().url);
    const json = connectClient(RailProxyService, proxy().url, { protocol: "connect-json" });
    const serverBefore = await counts(proxy().ready!.metricsPort, SERVER);
    const clientBefore = await counts(proxy().ready!.metricsPort, CLIENT);
    const railBefore = await counts(mesh.railStub.ready!.metricsPort, SERVER);

    for (let i = 0; i < 3; i++) await grpc.getRailStatement({ pageSize: 10 });
    for (let i = 0; i < 2; i++) await json.getRailStatement({ pageSize: 10 });
    // Refused by the handler before the rail is called: invalid_argument, no rail call.
    for (let i = 0; i < 2; i++) await expectRejected(grpc.getRailStatement({ pageSize: 5000 }), Code.InvalidArgument);
    await expectRejected(json.getRailStatement({ pageSize: 5000 }), Code.InvalidArgument);
    // Refused by the request gate (a body that is no message), before any handler.
    expect(await rawGrpc(proxy().url, `/${PROXY}/GetRailStatement`, grpcFrame(Uint8Array.of(0xff, 0xff, 0xff)))).toBe(String(Code.InvalidArgument));

    expect(delta(serverBefore, await counts(proxy().ready!.metricsPort, SERVER))).toEqual({
      [`${PROXY}/GetRailStatement/ok`]: 5,
      [`${PROXY}/GetRailStatement/invalid_argument`]: 4,
    });
    // The proxy's calls to the rail, as the proxy saw them, and as the rail answered them.
    expect(delta(clientBefore, await counts(proxy().ready!.metricsPort, CLIENT))).toEqual({ [`${RAIL}/ListPayments/ok`]: 5 });
    expect(delta(railBefore, await counts(mesh.railStub.ready!.metricsPort, SERVER))).toEqual({ [`${RAIL}/ListPayments/ok`]: 5 });
  });

  it("count a path no service serves as rpc_method unknown (the client's text never becomes a label)", async () => {
    const before = await counts(proxy().ready!.metricsPort, SERVER);
    const empty = grpcFrame(toBinary(GetRailStatementRequestSchema, create(GetRailStatementRequestSchema, {})));
    expect(await rawGrpc(proxy().url, `/${PROXY}/DropEverything`, empty)).toBe(String(Code.Unimplemented));
    expect(await rawGrpc(proxy().url, "/evil.v1.Service/Anything", empty)).toBe(String(Code.Unimplemented));
    expect(delta(before, await counts(proxy().ready!.metricsPort, SERVER))).toEqual({
      [`${PROXY}/unknown/unimplemented`]: 1,
      "unknown/unknown/unimplemented": 1,
    });
    const text = await (await fetch(`http://127.0.0.1:${proxy().ready!.metricsPort}/metrics`)).text();
    expect(text).not.toContain("DropEverything");
    expect(text).not.toContain("evil.v1");
  });

  it("leave health checks out, count a stream once, and count both servers of one process in one family (rail stub and its control API)", async () => {
    const health = connectClient(Health, proxy().url);
    const before = await counts(proxy().ready!.metricsPort, SERVER);
    for (let i = 0; i < 3; i++) await health.check({ service: "" });
    expect(delta(before, await counts(proxy().ready!.metricsPort, SERVER))).toEqual({});
    // A stream is counted once, when it ends.
    const reflection = connectClient(ServerReflection, proxy().url);
    async function* requests() {
      yield { host: "", messageRequest: { case: "listServices" as const, value: "" } };
    }
    for await (const _ of reflection.serverReflectionInfo(requests()));
    expect(delta(before, await counts(proxy().ready!.metricsPort, SERVER))).toEqual({ "grpc.reflection.v1.ServerReflection/ServerReflectionInfo/ok": 1 });

    const stubBefore = await counts(mesh.railStub.ready!.metricsPort, SERVER);
    await railControl(mesh).getFaults({});
    expect(delta(stubBefore, await counts(mesh.railStub.ready!.metricsPort, SERVER))).toEqual({
      "railfence.railcontrol.v1.RailControlService/GetFaults/ok": 1,
    });
  });

  it("count the executor's calls as a client exactly as the servers it called count them", async () => {
    const executor = mesh.executors[0]!;
    const payouts = connectClient(PayoutService, mesh.payouts!.url);
    const req = { accountId: "acc-red-1", amount: { amountMinor: 100n, currency: "EUR" }, beneficiary: "ben-1" };
    const { payout } = await payouts.createPayout(req, { headers: { "idempotency-key": randomUUID() } });
    await expectRejected(payouts.createPayout({ ...req, accountId: "" }, { headers: { "idempotency-key": randomUUID() } }), Code.InvalidArgument);
    await eventually(async () => (await payouts.getPayout({ payoutId: payout!.payoutId })).payout?.state === 3, "payout PAID");
    const payoutsServer = await counts(mesh.payouts!.ready!.metricsPort, SERVER);
    expect(payoutsServer.get("railfence.payouts.v1.PayoutService/CreatePayout/ok")).toBe(1);
    expect(payoutsServer.get("railfence.payouts.v1.PayoutService/CreatePayout/invalid_argument")).toBe(1);
    // The executor's calls settle (a lock release may follow the PAID state); then client == server.
    const side = async (port: number, family: string, service: string) =>
      [...(await counts(port, family))].filter(([k]) => k.startsWith(`${service}/`)).sort((a, b) => a[0].localeCompare(b[0]));
    await eventually(async () => {
      const client = await side(executor.ready!.metricsPort, CLIENT, PROXY);
      const server = await side(proxy().ready!.metricsPort, SERVER, PROXY);
      const serverOwn = server.filter(([k]) => !k.startsWith(`${PROXY}/GetRailStatement/`) && !k.startsWith(`${PROXY}/unknown/`));
      return JSON.stringify(client) === JSON.stringify(serverOwn) && client.some(([k, v]) => k === `${PROXY}/SubmitPayout/ok` && v === 1);
    }, "the executor's rail-proxy calls, counted on both sides");
    await eventually(async () => {
      const client = await side(executor.ready!.metricsPort, CLIENT, "railfence.lock.v1.LockService");
      const server = await side(mesh.lock!.ready!.metricsPort, SERVER, "railfence.lock.v1.LockService");
      return JSON.stringify(client) === JSON.stringify(server) && client.some(([k, v]) => k.endsWith("/Acquire/ok") && v >= 1);
    }, "the executor's lock calls, counted on both sides");
  });

  it("count a call to a rail that is gone as unavailable on the calling side, and the caller's answer under its code", async () => {
    const grpc = connectClient(RailProxyService, proxy().url);
    await mesh.railStub.stop();
    const serverBefore = await counts(proxy().ready!.metricsPort, SERVER);
    const clientBefore = await counts(proxy().ready!.metricsPort, CLIENT);
    for (let i = 0; i < 2; i++) await expectRejected(grpc.getRailStatement({ pageSize: 10 }), Code.Unavailable, "RAIL_UNAVAILABLE");
    expect(delta(serverBefore, await counts(proxy().ready!.metricsPort, SERVER))).toEqual({ [`${PROXY}/GetRailStatement/unavailable`]: 2 });
    expect(delta(clientBefore, await counts(proxy().ready!.metricsPort, CLIENT))).toEqual({ [`${RAIL}/ListPayments/unavailable`]: 2 });
  });
});
