/**
 * One trace per payout, across real processes: CreatePayout (payouts) -> executor -> lock ->
 * rail-proxy (admission, pg) -> rail-stub, exported over OTLP/HTTP to an in-test receiver.
 */
import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { connectClient, db, eventually, expectRejected, proxyClient } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";
import { OtlpReceiver } from "./otlp-receiver.js";

let receiver: OtlpReceiver;
let mesh: Mesh;
let paydb: pg.Client;

const OTEL = () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_BSP_SCHEDULE_DELAY: "200" });

beforeAll(async () => {
  receiver = await new OtlpReceiver().start();
  mesh = testMesh({ proxies: 2, proxyEnv: OTEL(), railStubEnv: OTEL(), lockEnv: OTEL(), executorEnv: OTEL() });
  await mesh.start();
  await mesh.startLock();
  await mesh.startPayouts(OTEL());
  await mesh.addExecutor();
  paydb = await db(mesh.dbUrl("paydb"));
});

afterAll(async () => {
  await paydb?.end();
  await mesh?.stop();
  await receiver?.stop();
});

describe("tracing", () => {
  it("one trace id covers payouts, executor, lock, rail-proxy, pg and rail-stub for one payout", async () => {
    const payouts = connectClient(PayoutService, mesh.payouts!.url);
    const created = await payouts.createPayout(
      { accountId: "acc-trace", amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-trace" },
      { headers: { "idempotency-key": randomUUID() } },
    );
    const payoutId = created.payout!.payoutId;
    await eventually(async () => (await payouts.getPayout({ payoutId })).payout?.state === 3, "payout PAID");

    const spans = await eventually(
      async () => {
        const create = receiver.spans.find((s) => s.name.endsWith("CreatePayout") && s.kind === 2);
        if (!create) return undefined;
        const trace = receiver.spans.filter((s) => s.traceId === create.traceId);
        const services = new Set(trace.map((s) => s.service));
        const complete =
          ["payouts", "executor", "lock", "rail-proxy", "rail-stub"].every((x) => services.has(x)) &&
          trace.some((s) => s.name.endsWith("SubmitPayment") && s.service === "rail-stub");
        // Spans arrive in export batches per process, and a parent ends (and is exported) after
        // its children: wait until the proxy's and executor's own server/internal spans are in too.
        const ids = new Set(trace.map((s) => s.spanId));
        const connected = trace.filter((s) => !ids.has(s.parentSpanId)).length === 1;
        return complete && connected ? trace : undefined;
      },
      "spans from every service in one connected trace",
      30_000,
    );

    const byId = new Map(spans.map((s) => [s.spanId, s]));
    // Every span but the root has its parent in the same trace: one connected tree.
    const roots = spans.filter((s) => !byId.has(s.parentSpanId));
    expect(roots.map((r) => r.name)).toEqual([expect.stringContaining("CreatePayout")]);

    const submit = spans.find((s) => s.service === "rail-proxy" && s.name.endsWith("SubmitPayout") && s.kind === 2)!;
    expect(submit.attributes).toMatchObject({
      "rpc.system": "grpc",
      "rpc.service": "railfence.railproxy.v1.RailProxyService",
      "rpc.method": "SubmitPayout",
      "rpc.grpc.status_code": 0,
      "railfence.account_id": "acc-trace",
      "railfence.admission": "ADMITTED",
    });
    expect(String(submit.attributes["railfence.payout_id"])).toContain(payoutId);
    // The proxy's server span is the child of the executor's client span.
    expect(byId.get(submit.parentSpanId)?.service).toBe("executor");
    // pg queries appear as children inside the proxy.
    expect(
      spans.some((s) => (s.service === "rail-proxy" && s.attributes["db.system"] === "postgresql") || s.attributes["db.system.name"] === "postgresql"),
    ).toBe(true);
    // A pool checkout is not a step of the payout: no connect spans (they doubled the spans per query).
    expect(spans.filter((s) => /^pg(-pool)?\.connect$/.test(s.name)).map((s) => `${s.service} ${s.name}`)).toEqual([]);
    // The rail call is a child of the proxy's admission.
    const railServer = spans.find((s) => s.service === "rail-stub" && s.name.endsWith("SubmitPayment"))!;
    expect(byId.get(byId.get(railServer.parentSpanId)!.parentSpanId)?.service).toBe("rail-proxy");
    // Never the credential, never the beneficiary.
    const everything = JSON.stringify(receiver.spans);
    expect(everything).not.toContain(mesh.credential);
    expect(everything).not.toContain("ben-trace");
  });

  it("a FENCED_OUT submission shows railfence.admission=FENCED_OUT and an error status", async () => {
    const proxy = proxyClient(mesh.proxies[0]!.url);
    const req = { accountId: "acc-fenced-trace", amount: { amountMinor: 1n, currency: "EUR" }, beneficiary: "b" };
    // Both payouts fenced by their holders: the binding admits both, the mark refuses the stale one.
    await proxy.submitPayout(await fencedFor(paydb, { ...req, payoutId: "trace-p1", fencingToken: 10n }));
    await expectRejected(proxy.submitPayout(await fencedFor(paydb, { ...req, payoutId: "trace-p2", fencingToken: 3n })), Code.Aborted, "FENCED_OUT");
    const span = await eventually(
      async () => receiver.spans.find((s) => s.service === "rail-proxy" && s.attributes["railfence.payout_id"] === "trace-p2" && s.kind === 2),
      "fenced-out span",
    );
    expect(span.attributes["railfence.admission"]).toBe("FENCED_OUT");
    expect(span.attributes["railfence.error_reason"]).toBe("FENCED_OUT");
    expect(span.status).toBe(2);
  });

  it("a one-shot reconciler run (the CronJob) exports its spans before it exits", async () => {
    const before = receiver.spans.filter((s) => s.service === "reconciler").length;
    const run = await mesh.reconcileOnce({ ...OTEL(), OTEL_SERVICE_NAME: "reconciler" });
    expect(run.code).toBe(0);
    // The process has exited: whatever it did not flush is lost for good; what it sent is in
    // the receiver once the receiver has handled the request that already arrived.
    const spans = await eventually(
      () => {
        const mine = receiver.spans.filter((s) => s.service === "reconciler").slice(before);
        return mine.some((s) => s.name.includes("RailProxyService/ListUnresolved")) && mine;
      },
      "the one-shot run's ListUnresolved span",
      5_000,
    );
    expect(spans.map((s) => s.name)).toEqual(expect.arrayContaining([expect.stringContaining("RailProxyService/ListUnresolved")]));
  });

  it("log lines inside a traced call carry trace_id and span_id", async () => {
    // Its own refused call, so this test does not lean on the one above having run.
    const proxy = proxyClient(mesh.proxies[0]!.url);
    const fencedLines = () => mesh.proxies[0]!.lines.filter((l) => l.includes('"reason":"FENCED_OUT"'));
    const before = fencedLines().length;
    const req = { accountId: "acc-log-trace", amount: { amountMinor: 1n, currency: "EUR" }, beneficiary: "b" };
    await proxy.submitPayout(await fencedFor(paydb, { ...req, payoutId: "log-p1", fencingToken: 10n }));
    await expectRejected(proxy.submitPayout(await fencedFor(paydb, { ...req, payoutId: "log-p2", fencingToken: 3n })), Code.Aborted, "FENCED_OUT");
    const line = await eventually(async () => fencedLines()[before], "the FENCED_OUT log line");
    expect(JSON.parse(line!)).toMatchObject({ trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), span_id: expect.stringMatching(/^[0-9a-f]{16}$/) });
  });
});
