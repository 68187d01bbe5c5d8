/**
 * The fingerprint is of the request, not of its encoding: the same CreatePayout sent as Connect
 * JSON, as gRPC binary, and as hand-written JSON (other field order, explicit defaults, the
 * way `curl` users write it) is one request under one key.
 */
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { usePayoutsService, countPayouts, create, eventually, newKey, postJson, requestHeld } from "./support.js";

const t = usePayoutsService();

/** Holds every payout insert (inside its transaction) until released: a first request stays in progress. */
let blocker: pg.Client | undefined;
async function holdInserts(): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: t.paydb });
  blocker = client;
  await client.connect();
  await client.query("BEGIN");
  await client.query("LOCK TABLE payouts IN EXCLUSIVE MODE");
  return async () => {
    await client.query("COMMIT");
    await client.end();
    blocker = undefined;
  };
}
afterEach(async () => {
  await blocker?.query("ROLLBACK").catch(() => {});
  await blocker?.end().catch(() => {});
  blocker = undefined;
});

describe("request fingerprint across encodings", () => {
  it("a Connect JSON request is replayed to the same request over gRPC binary and to raw JSON", async () => {
    const key = newKey();
    const req = { accountId: "acct-enc", amount: { amountMinor: 1050n, currency: "EUR" }, beneficiary: "ben-1", clientReference: "" };
    const overJson = await create(t.c.json, req, key);
    expect(overJson.error).toBeUndefined();
    expect(overJson.replayed).toBe(false);

    const overGrpc = await create(t.c.grpc, req, key);
    expect(overGrpc.error).toBeUndefined();
    expect(overGrpc.replayed).toBe(true);
    expect(overGrpc.response!.payout!.payoutId).toBe(overJson.response!.payout!.payoutId);

    // Field order changed, an explicit default, amount as a JSON string and as a number.
    for (const body of [
      `{"clientReference":"","beneficiary":"ben-1","amount":{"currency":"EUR","amountMinor":"1050"},"accountId":"acct-enc"}`,
      `{"account_id":"acct-enc","amount":{"amount_minor":1050,"currency":"EUR"},"beneficiary":"ben-1"}`,
    ]) {
      const raw = await postJson(t.svc.url, "CreatePayout", body, { "idempotency-key": key });
      expect(raw.status).toBe(200);
      expect(raw.headers["idempotency-replayed"]).toBe("true");
      expect(JSON.parse(raw.body).payout.payoutId).toBe(overJson.response!.payout!.payoutId);
    }
    expect(await countPayouts(t.paydb, "account_id = 'acct-enc'")).toBe(1);
  });

  it("a gRPC binary request is replayed to the same request over Connect JSON; a changed body is not", async () => {
    const key = newKey();
    const req = { accountId: "acct-enc2", amount: { amountMinor: 77n, currency: "JPY" }, beneficiary: "ben/2", clientReference: "r-2" };
    const first = await create(t.c.grpc, req, key);
    expect(first.error).toBeUndefined();
    const again = await create(t.c.json, req, key);
    expect(again.replayed).toBe(true);
    expect(again.response!.payout!.payoutId).toBe(first.response!.payout!.payoutId);
    const changed = await create(t.c.json, { ...req, clientReference: "r-3" }, key);
    expect(changed.error?.code).toBe(Code.InvalidArgument);
    expect(changed.reason).toBe("IDEMPOTENCY_KEY_REUSED");
    expect(await countPayouts(t.paydb, "account_id = 'acct-enc2'")).toBe(1);
  });

  it("over plain Connect JSON the HTTP statuses are the contract's: 400 missing key, 400 reused key", async () => {
    const missing = await postJson(t.svc.url, "CreatePayout", `{"accountId":"acct-enc3","amount":{"amountMinor":"5","currency":"EUR"},"beneficiary":"b"}`);
    expect(missing.status).toBe(400);
    const err = JSON.parse(missing.body);
    expect(err.code).toBe("invalid_argument");
    expect(JSON.stringify(err.details)).toContain("google.rpc.ErrorInfo");

    const key = newKey();
    const ok = await postJson(t.svc.url, "CreatePayout", `{"accountId":"acct-enc3","amount":{"amountMinor":"5","currency":"EUR"},"beneficiary":"b"}`, {
      "idempotency-key": key,
    });
    expect(ok.status).toBe(200);
    const reused = await postJson(t.svc.url, "CreatePayout", `{"accountId":"acct-enc3","amount":{"amountMinor":"6","currency":"EUR"},"beneficiary":"b"}`, {
      "idempotency-key": key,
    });
    expect(reused.status).toBe(400);
    expect(JSON.parse(reused.body).code).toBe("invalid_argument");
    expect(await countPayouts(t.paydb, "account_id = 'acct-enc3'")).toBe(1);
  });

  it("409: a JSON request while the same key's gRPC binary request is in progress (and the reverse) is IDEMPOTENCY_CONFLICT; one payout", async () => {
    const body = `{"accountId":"acct-enc4","amount":{"amountMinor":"7","currency":"EUR"},"beneficiary":"b"}`;
    const req = { accountId: "acct-enc4", amount: { amountMinor: 7n, currency: "EUR" }, beneficiary: "b", clientReference: "" };

    // gRPC binary first; the same request as raw Connect JSON while it runs.
    const key = newKey();
    const release = await holdInserts();
    const binary = create(t.c.grpc, req, key);
    await eventually(() => requestHeld(t.paydb, key), "the binary request to be held in progress");
    const json = await postJson(t.svc.url, "CreatePayout", body, { "idempotency-key": key });
    expect(json.status).toBe(409);
    const err = JSON.parse(json.body);
    expect(err.code).toBe("aborted");
    expect(JSON.stringify(err.details)).toContain("google.rpc.ErrorInfo");
    expect(Number(json.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(await requestHeld(t.paydb, key)).toBe(true); // still the binary request's
    await release();
    const first = await binary;
    expect(first.error).toBeUndefined();
    // The JSON client's retry is answered with the binary request's payout.
    const retry = await postJson(t.svc.url, "CreatePayout", body, { "idempotency-key": key });
    expect(retry.status).toBe(200);
    expect(retry.headers["idempotency-replayed"]).toBe("true");
    expect(JSON.parse(retry.body).payout.payoutId).toBe(first.response!.payout!.payoutId);

    // JSON first; the same request over gRPC binary while it runs.
    const key2 = newKey();
    const release2 = await holdInserts();
    const jsonFirst = postJson(t.svc.url, "CreatePayout", body, { "idempotency-key": key2 });
    await eventually(() => requestHeld(t.paydb, key2), "the JSON request to be held in progress");
    const second = await create(t.c.grpc, req, key2);
    expect(second.error?.code).toBe(Code.Aborted);
    expect(second.reason).toBe("IDEMPOTENCY_CONFLICT");
    await release2();
    expect((await jsonFirst).status).toBe(200);
    expect(await countPayouts(t.paydb, "account_id = 'acct-enc4'")).toBe(2); // one per key
  });
});
