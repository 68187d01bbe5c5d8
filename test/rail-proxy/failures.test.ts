/**
 * ADR-007 failures and rail ambiguity against real processes: restart amnesia (i), a lost
 * rail answer, a replica killed between intent commit and rail answer, graceful drain, and the
 * negative control that proves the fencing tests can fail. Every submission comes from the
 * payout's holder (fencedFor), so what refuses it is the step under test, never the binding.
 */
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { ResolutionOutcome, SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { db, eventually, expectRejected, FaultKind, metricValue, proxyClient, railBookings, railControl } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";

let mesh: Mesh;
let paydb: pg.Client;
let raildb: pg.Client;
let seq = 0;
const uid = (p: string) => `${p}-${Date.now().toString(36)}-${++seq}`;
const request = (accountId: string, payoutId: string, token: bigint) => ({
  accountId,
  payoutId,
  fencingToken: token,
  amount: { amountMinor: 2500n, currency: "GBP" },
  beneficiary: "ben-002",
});
const railCalls = async () => (await railControl(mesh).getFaults({})).submitCalls;

beforeAll(async () => {
  // Short deadline and margin so ambiguity shows up within the test.
  mesh = testMesh({ proxies: 2, proxyEnv: { RAIL_DEADLINE_MS: "700", AMBIGUITY_MARGIN_MS: "300", SWEEP_INTERVAL_MS: "200" } });
  await mesh.start();
  paydb = await db(mesh.dbUrl("paydb"));
  raildb = await db(mesh.databases.raildb);
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

describe("ADR-007 failure (i): restart amnesia", () => {
  it("a stale token after every proxy restarted is FENCED_OUT: the mark survived in paydb", async () => {
    const acc = uid("acc");
    await proxyClient(mesh.proxies[0]!.url).submitPayout(await fencedFor(paydb, request(acc, uid("p"), 100n)));
    for (const p of mesh.proxies) await p.restart();
    const stale = uid("p");
    for (const p of mesh.proxies) {
      await expectRejected(proxyClient(p.url).submitPayout(await fencedFor(paydb, request(acc, stale, 41n))), Code.Aborted, "FENCED_OUT");
    }
    expect(await railBookings(raildb, stale)).toBe(0);
  });
});

describe("step 4: the rail's answer is lost", () => {
  it("records TIMEOUT, answers RAIL_AMBIGUOUS after exactly one rail call, and refuses a resubmission", async () => {
    const acc = uid("acc");
    const p = uid("p");
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, count: 1, clientReferencePrefix: p }] });
    const proxy = proxyClient(mesh.proxies[0]!.url);
    const callsBefore = await railCalls();
    await expectRejected(proxy.submitPayout(await fencedFor(paydb, request(acc, p, 5n))), Code.Aborted, "RAIL_AMBIGUOUS");
    expect(await railCalls()).toBe(callsBefore + 1n);
    expect(await railBookings(raildb, p)).toBe(1); // it landed; only the answer was lost
    const got = await proxy.getSubmission({ payoutId: p });
    expect(got.submission?.state).toBe(SubmissionState.TIMEOUT);
    expect(got.submission?.ambiguous).toBe(true);

    await expectRejected(
      proxyClient(mesh.proxies[1]!.url).submitPayout(await fencedFor(paydb, request(acc, p, 6n))),
      Code.AlreadyExists,
      "DUPLICATE_SUBMISSION",
    );
    expect(await railCalls()).toBe(callsBefore + 1n);

    const unresolved = await proxy.listUnresolved({});
    expect(unresolved.submissions.map((s) => s.payoutId)).toContain(p);
    // PAID names the payment that proves it: without it, refused and nothing resolved.
    await expectRejected(
      proxy.resolveSubmission({ payoutId: p, outcome: ResolutionOutcome.PAID, actor: "operator:alice", note: "seen on statement" }),
      Code.InvalidArgument,
      "FIELD_REQUIRED",
    );
    const resolved = await proxy.resolveSubmission({
      payoutId: p,
      outcome: ResolutionOutcome.PAID,
      actor: "operator:alice",
      note: "seen on statement",
      railReference: "rr_seen_on_statement",
    });
    expect(resolved.submission?.state).toBe(SubmissionState.RESOLVED_PAID);
    expect(resolved.submission?.railReference).toBe("rr_seen_on_statement");
    expect(resolved.submission?.resolution).toMatchObject({ actor: "operator:alice", note: "seen on statement", previousState: SubmissionState.TIMEOUT });
    await expectRejected(
      proxy.resolveSubmission({ payoutId: p, outcome: ResolutionOutcome.NOT_PAID, actor: "operator:bob", note: "" }),
      Code.FailedPrecondition,
      "NOT_AMBIGUOUS",
    );
    expect(await railCalls()).toBe(callsBefore + 1n);
  });

  it("a rail that never answers and never books is also TIMEOUT (ambiguous), never retried", async () => {
    const acc = uid("acc");
    const p = uid("p");
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.NEVER_LAND_HANG, latencyMs: 0, count: 1, clientReferencePrefix: p }] });
    const callsBefore = await railCalls();
    await expectRejected(proxyClient(mesh.proxies[1]!.url).submitPayout(await fencedFor(paydb, request(acc, p, 5n))), Code.Aborted, "RAIL_AMBIGUOUS");
    expect(await railCalls()).toBe(callsBefore + 1n);
    expect(await railBookings(raildb, p)).toBe(0);
    expect((await proxyClient(mesh.proxies[1]!.url).getSubmission({ payoutId: p })).submission?.state).toBe(SubmissionState.TIMEOUT);
  });

  it("a rail rejection is recorded as REJECTED with the rail's reason", async () => {
    const p = uid("p");
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.REJECT, latencyMs: 0, count: 1, clientReferencePrefix: p }] });
    const res = await proxyClient(mesh.proxies[0]!.url).submitPayout(await fencedFor(paydb, request(uid("acc"), p, 5n)));
    expect(res.submission).toMatchObject({ state: SubmissionState.REJECTED, railReason: "INJECTED_REJECT" });
  });
});

describe("a replica killed between intent commit and rail answer", () => {
  it("leaves the intent FORWARDING; the sweeper makes it ambiguous; it is never re-forwarded", async () => {
    const acc = uid("acc");
    const p = uid("p");
    // The rail holds the call long enough for us to kill the replica mid-call.
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.LATENCY, latencyMs: 600, count: 1, clientReferencePrefix: p }] });
    const victim = mesh.proxies[0]!;
    const callsBefore = await railCalls();
    const call = proxyClient(victim.url)
      .submitPayout(await fencedFor(paydb, request(acc, p, 9n)))
      .catch((e: unknown) => e);
    await eventually(
      async () => (await paydb.query("SELECT 1 FROM rail_submissions WHERE payout_id = $1 AND state = 'FORWARDING'", [p])).rowCount,
      "intent committed",
    );
    await eventually(async () => (await railCalls()) > callsBefore, "rail call in flight");
    victim.kill("SIGKILL");
    await call;
    const swept = await eventually(async () => {
      const { rows } = await paydb.query("SELECT state, ambiguity_cause FROM rail_submissions WHERE payout_id = $1", [p]);
      return rows[0]?.state === "TIMEOUT" ? rows[0] : undefined;
    }, "sweeper on the surviving replica marks the row ambiguous");
    expect(swept.ambiguity_cause).toBe("STALE_FORWARDING");
    const unresolved = await proxyClient(mesh.proxies[1]!.url).listUnresolved({});
    expect(unresolved.submissions.find((s) => s.payoutId === p)?.ambiguous).toBe(true);
    expect(await railCalls()).toBe(callsBefore + 1n);
    expect(await railBookings(raildb, p)).toBeLessThanOrEqual(1);
    expect(await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_ambiguous_submissions")).toBeGreaterThanOrEqual(1);
    await victim.restart();
  });
});

describe("graceful drain", () => {
  it("SIGTERM lets an in-flight submission finish and record the rail's answer, then exits 0", async () => {
    const p = uid("p");
    await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.LATENCY, latencyMs: 400, count: 1, clientReferencePrefix: p }] });
    const proxy = mesh.proxies[1]!;
    const callsBefore = await railCalls();
    const call = proxyClient(proxy.url).submitPayout(await fencedFor(paydb, request(uid("acc"), p, 4n)));
    await eventually(async () => (await railCalls()) > callsBefore, "rail call in flight");
    const exit = proxy.stop(10_000);
    const res = await call;
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(await exit).toBe(0);
    const { rows } = await paydb.query("SELECT state FROM rail_submissions WHERE payout_id = $1", [p]);
    expect(rows[0].state).toBe("ACCEPTED");
    await proxy.start({ PORT: String(proxy.ready!.port), METRICS_PORT: String(proxy.ready!.metricsPort) });
  });
});

describe("a plain @grpc/grpc-js client", () => {
  it("reads the status code and the ErrorInfo reason from grpc-status-details-bin", async () => {
    const grpc = await import("@grpc/grpc-js");
    const { fromBinary, anyUnpack } = await import("@bufbuild/protobuf").then(async (m) => ({
      fromBinary: m.fromBinary,
      anyUnpack: (await import("@bufbuild/protobuf/wkt")).anyUnpack,
    }));
    const { StatusSchema } = await import("../../services/shared/gen/google/rpc/status_pb.js");
    const { ErrorInfoSchema } = await import("../../services/shared/gen/google/rpc/error_details_pb.js");
    const { SubmitPayoutRequestSchema } = await import("../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js");
    const { create, toBinary } = await import("@bufbuild/protobuf");
    const client = new grpc.Client(`127.0.0.1:${mesh.proxies[0]!.ready!.port}`, grpc.credentials.createInsecure());
    const body = Buffer.from(toBinary(SubmitPayoutRequestSchema, create(SubmitPayoutRequestSchema, request(uid("acc"), uid("p"), 0n))));
    const err = await new Promise<import("@grpc/grpc-js").ServiceError>((resolve) => {
      client.makeUnaryRequest(
        "/railfence.railproxy.v1.RailProxyService/SubmitPayout",
        (b: Buffer) => b,
        (b: Buffer) => b,
        body,
        (e) => resolve(e!),
      );
    });
    client.close();
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    const bin = err.metadata.get("grpc-status-details-bin")[0] as Buffer;
    const status = fromBinary(StatusSchema, bin);
    const info = status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).find(Boolean);
    expect(info).toMatchObject({ reason: "TOKEN_INVALID", domain: "railfence.dev" });
  });
});

describe("negative control: RAIL_PROXY_FENCING_ENABLED=false (harness scenario C5 §5.2 only)", () => {
  it("lets the stale token reach the rail, so the fencing tests above can fail", async () => {
    const unsafe = await mesh.addProxy({ RAIL_PROXY_FENCING_ENABLED: "false" });
    try {
      expect(await metricValue(unsafe.ready!.metricsPort, "railfence_rail_proxy_fencing_enabled")).toBe(0);
      expect(unsafe.lines.some((l) => l.includes('"event":"fencing_disabled"'))).toBe(true);
      const acc = uid("acc");
      await proxyClient(mesh.proxies[1]!.url).submitPayout(await fencedFor(paydb, request(acc, uid("p"), 90n)));
      const stale = uid("p");
      const res = await proxyClient(unsafe.url).submitPayout(await fencedFor(paydb, request(acc, stale, 41n)));
      expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
      expect(await railBookings(raildb, stale)).toBe(1);
      const { rows } = await paydb.query("SELECT mark_advanced FROM rail_submissions WHERE payout_id = $1", [stale]);
      expect(rows[0].mark_advanced).toBe(false); // what the drill checker reports
    } finally {
      await unsafe.stop();
      mesh.proxies.pop();
    }
  });
});
