/**
 * Fail closed on money: with paydb down, CreatePayout refuses with UNAVAILABLE
 * IDEMPOTENCY_UNAVAILABLE and a retry hint (RetryInfo + Retry-After), reads answer
 * UNAVAILABLE PAYDB_UNAVAILABLE, and nothing was created once paydb is back. This file runs
 * its own PostgreSQL because it stops it.
 */
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresServer } from "../../tools/harness/postgres.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { RetryInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import { clients, countPayouts, create, createPaydb, keyRow, metric, newKey, postJson, sql, startPayouts, validRequest } from "./support.js";

let pgServer: PostgresServer;
let paydb: string;
let svc: ServiceProcess;
let c: ReturnType<typeof clients>;

beforeAll(async () => {
  pgServer = await PostgresServer.start({ durable: false });
  paydb = await createPaydb(pgServer.url("postgres"));
  svc = await startPayouts(paydb);
  c = clients(svc.url);
});

afterAll(async () => {
  c?.close();
  await svc?.stop(5000);
  await pgServer?.destroy();
});

describe("paydb outage", () => {
  it("refuses money and reads while paydb is down, creates nothing, and runs the same key once it is back", async () => {
    const existing = await create(c.grpc, validRequest({ accountId: "acct-outage" }), newKey());
    expect(existing.error).toBeUndefined();
    const key = newKey();
    const req = validRequest({ accountId: "acct-outage" });

    await pgServer.stop("fast");
    try {
      const refused = await create(c.grpc, req, key);
      expect(refused.error?.code).toBe(Code.Unavailable);
      expect(refused.reason).toBe("IDEMPOTENCY_UNAVAILABLE");
      const retry = refused.error!.findDetails(RetryInfoSchema);
      expect(retry).toHaveLength(1);
      expect(Number(retry[0]!.retryDelay!.seconds) * 1000 + retry[0]!.retryDelay!.nanos / 1e6).toBeGreaterThan(0);
      expect(refused.error!.rawMessage).not.toMatch(/postgres|127\.0\.0\.1|ECONNREFUSED/i);

      // Over plain Connect JSON: 503 with Retry-After.
      const raw = await postJson(
        svc.url,
        "CreatePayout",
        JSON.stringify({ accountId: "acct-outage", amount: { amountMinor: "9", currency: "EUR" }, beneficiary: "b" }),
        {
          "idempotency-key": key,
        },
      );
      expect(raw.status).toBe(503);
      expect(Number(raw.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      expect(raw.body).toContain("IDEMPOTENCY_UNAVAILABLE");

      const read = c.grpc.getPayout({ payoutId: existing.response!.payout!.payoutId });
      await expect(read).rejects.toMatchObject({ code: Code.Unavailable });
      expect(errorReason(await read.catch((e: unknown) => e))).toBe("PAYDB_UNAVAILABLE");
      const list = await c.grpc.listPayouts({}).catch((e: unknown) => e);
      expect(errorReason(list)).toBe("PAYDB_UNAVAILABLE");
      expect(await metric(svc.ready!.metricsPort, "railfence_payouts_idempotency_unavailable_total")).toBeGreaterThanOrEqual(2);
    } finally {
      await pgServer.startProcess();
    }

    // Nothing from the outage was recorded: no payout, no key.
    expect(await countPayouts(paydb, "account_id = 'acct-outage'")).toBe(1);
    expect(await keyRow(paydb, key)).toBeUndefined();
    expect(await sql(paydb, "SELECT 1 FROM idempotency_keys WHERE state = 'IN_PROGRESS'")).toHaveLength(0);

    // The client's retry with the same key, as the contract tells it to, now runs once.
    const after = await create(c.grpc, req, key);
    expect(after.error).toBeUndefined();
    expect(after.replayed).toBe(false);
    expect(await countPayouts(paydb, "account_id = 'acct-outage'")).toBe(2);
    expect((await c.grpc.getPayout({ payoutId: after.response!.payout!.payoutId })).payout!.accountId).toBe("acct-outage");
  });
});
