/**
 * What generic HTTP retry middleware and gRPC's own retry read from a real payouts process
 * (decision 053): a transient refusal is 503 with Retry-After over Connect JSON and carries
 * grpc-retry-pushback-ms over gRPC; a final refusal is neither 429 nor 503 and carries no hint.
 * The transient refusal is LIMITS_UNAVAILABLE: the money-limit store sits behind a TCP proxy
 * that the test turns to refusing connections.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { createPaydb, dropPaydb, newKey, startPayouts } from "../payouts/support.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { rawCreatePayout } from "./raw-call.js";

let paydb: string;
let proxy: TcpProxy;
let svc: ServiceProcess;

beforeAll(async () => {
  paydb = await createPaydb();
  const pgPort = Number(new URL(paydb).port);
  proxy = await TcpProxy.start(pgPort);
  svc = await startPayouts(paydb, {
    LIMITS_DB_URL: paydb.replace(`:${pgPort}/`, `:${proxy.port}/`),
    LIMITS_TIMEOUT_MS: "500",
    LIMIT_ACCOUNT_DAILY_AMOUNT: "*=1000",
    PAYOUTS_DEFAULT_CLIENT_ID: "client-retry-hints",
  });
}, 60_000);

afterAll(async () => {
  await svc?.stop(5000);
  await proxy?.close();
  if (paydb) await dropPaydb(paydb);
});

const payout = (amountMinor: bigint) => ({ accountId: "acct-hints", amountMinor, currency: "EUR", beneficiary: "b" });

describe("retry hints on the wire", () => {
  it("a final refusal (a payout above the whole daily limit) is 400 over Connect JSON and carries no hint on either protocol", async () => {
    const json = await rawCreatePayout(svc.url, "connect-json", payout(5000n), { "idempotency-key": newKey() });
    expect(json.body).toContain("PAYOUT_ABOVE_DAILY_LIMIT");
    expect(json.status).toBe(400);
    expect([429, 503]).not.toContain(json.status);
    expect(json.headers["retry-after"]).toBeUndefined();

    const grpc = await rawCreatePayout(svc.url, "grpc", payout(5000n), { "idempotency-key": newKey() });
    expect(grpc.headers["grpc-status"]).toBe("9"); // failed_precondition
    expect(grpc.headers["grpc-retry-pushback-ms"]).toBeUndefined();
  });

  it("a transient refusal (the limit store unreachable) is 503 with Retry-After over Connect JSON, and carries grpc-retry-pushback-ms over gRPC", async () => {
    proxy.refuse();
    try {
      const json = await rawCreatePayout(svc.url, "connect-json", payout(10n), { "idempotency-key": newKey() });
      expect(json.body).toContain("LIMITS_UNAVAILABLE");
      expect(json.status).toBe(503);
      expect(json.headers["retry-after"]).toMatch(/^[1-9]\d*$/);

      const grpc = await rawCreatePayout(svc.url, "grpc", payout(10n), { "idempotency-key": newKey() });
      expect(grpc.headers["grpc-status"]).toBe("14"); // unavailable
      expect(grpc.headers["grpc-retry-pushback-ms"]).toMatch(/^\d+$/);
      expect(Number(grpc.headers["grpc-retry-pushback-ms"])).toBeGreaterThan(0);
      expect(grpc.headers["grpc-status-details-bin"]).toBeDefined(); // ErrorInfo + RetryInfo
    } finally {
      proxy.heal();
    }
  });
});
