/**
 * Request ids on a real payouts process (decision 054): every answer, success or refusal, over
 * Connect, gRPC and gRPC-Web, carries the call's trace id (railfence-trace-id) and echoes a valid
 * x-request-id; the service's log lines for the call carry both; an invalid x-request-id is
 * ignored (neither echoed nor logged), while the trace id still is.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { createPaydb, dropPaydb, newKey, startPayouts } from "../payouts/support.js";
import { logEvents, waitForLog } from "../support/log-events.js";
import { rawCreatePayout } from "./raw-call.js";

let paydb: string;
let svc: ServiceProcess;

beforeAll(async () => {
  paydb = await createPaydb();
  svc = await startPayouts(paydb, { PAYOUTS_DEFAULT_CLIENT_ID: "client-call-ids" });
}, 60_000);

afterAll(async () => {
  await svc?.stop(5000);
  if (paydb) await dropPaydb(paydb);
});

const payout = { accountId: "acct-ids", amountMinor: 10n, currency: "EUR", beneficiary: "b" };
const TRACE_ID = /^[0-9a-f]{32}$/;
const requestId = (what: string) => `${what}-${randomBytes(6).toString("hex")}`;

describe("every answer carries the call's ids", () => {
  it.each(["connect-json", "grpc", "grpc-web"] as const)("a successful %s call gets its x-request-id back with a trace id", async (protocol) => {
    const id = requestId(`ok-${protocol}`);
    const a = await rawCreatePayout(svc.url, protocol, payout, { "idempotency-key": newKey(), "x-request-id": id });
    expect(a.status).toBe(200);
    if (protocol !== "connect-json") expect(a.headers["grpc-status"] ?? "0").toBe("0");
    expect(a.headers["x-request-id"]).toBe(id);
    expect(a.headers["railfence-trace-id"]).toMatch(TRACE_ID);
  });

  it.each(["connect-json", "grpc", "grpc-web"] as const)(
    "a %s refusal carries both ids, and the service's log line for the call names them",
    async (protocol) => {
      const id = requestId(`refused-${protocol}`);
      // No idempotency-key: refused by the handler (IDEMPOTENCY_KEY_MISSING), logged at the boundary.
      const a = await rawCreatePayout(svc.url, protocol, payout, { "x-request-id": id });
      // Connect: the error body; gRPC: the status header; gRPC-Web: the status in the body's trailer frame.
      const status = { "connect-json": /IDEMPOTENCY_KEY_MISSING/, grpc: /^3 /, "grpc-web": /grpc-status:\s*3/ }[protocol];
      expect(`${a.headers["grpc-status"] ?? ""} ${a.body}`).toMatch(status);
      expect(a.headers["x-request-id"]).toBe(id);
      const traceId = a.headers["railfence-trace-id"];
      expect(traceId).toMatch(TRACE_ID);
      const line = await waitForLog(svc, (e) => e.request_id === id, `the refusal of ${id}`);
      expect(line).toMatchObject({ event: "rpc_error", reason: "IDEMPOTENCY_KEY_MISSING", trace_id: traceId, request_id: id });
    },
  );

  it("a refusal written before any handler (unknown method) carries them too, and so does its log line", async () => {
    const id = requestId("gate");
    const a = await rawCreatePayout(svc.url, "grpc", payout, { "x-request-id": id }, "/railfence.payouts.v1.PayoutService/NoSuchMethod");
    expect(a.headers["grpc-status"]).toBe("12");
    expect(a.headers["x-request-id"]).toBe(id);
    const line = await waitForLog(svc, (e) => e.request_id === id, `the gate's refusal of ${id}`);
    expect(line).toMatchObject({ event: "rpc_refused", trace_id: a.headers["railfence-trace-id"] });
  });

  it("adopts the trace id of the caller's traceparent", async () => {
    const traceId = randomBytes(16).toString("hex");
    const a = await rawCreatePayout(svc.url, "connect-json", payout, {
      "idempotency-key": newKey(),
      traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01`,
    });
    expect(a.status).toBe(200);
    expect(a.headers["railfence-trace-id"]).toBe(traceId);
  });

  it.each([
    ["too long", "x".repeat(129)],
    ["with a space", "two words"],
  ])("negative control: an x-request-id %s is ignored (not echoed, not logged); the trace id still is", async (_, bad) => {
    const before = logEvents(svc).length;
    const a = await rawCreatePayout(svc.url, "grpc", payout, { "x-request-id": bad });
    expect(a.headers["grpc-status"]).toBe("3");
    expect(a.headers["x-request-id"]).toBeUndefined();
    const traceId = a.headers["railfence-trace-id"];
    expect(traceId).toMatch(TRACE_ID);
    const line = await waitForLog(svc, (e) => e.trace_id === traceId, "the refusal of the call with a bad id");
    expect(line.request_id).toBeUndefined();
    expect(
      logEvents(svc)
        .slice(before)
        .some((e) => e.request_id === bad),
    ).toBe(false);
  });
});
