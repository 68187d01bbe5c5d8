/**
 * A key's retention reaches the client, and a payout can be found by what the client kept:
 *
 * - every CreatePayout answer tied to a stored key (a new payout, a replay, a reused-key
 *   refusal) carries `idempotency-key-expires-at`, the instant the server forgets the key;
 * - LookupPayout finds a payout by idempotency key or client reference, scoped to the caller
 *   like GetPayout, and still finds it after the key's retention ended and the key was purged.
 *
 * Three processes on one paydb: A (client-a, 24 h retention), B (client-b) and S (client-a again,
 * a 1.5 s retention with the test override and a 200 ms purge).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorReason } from "../../services/shared/domain/errors.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { clients, create, createPaydb, dropPaydb, eventually, keyRow, newKey, sql, startPayouts, validRequest } from "./support.js";

const EXPIRES_HEADER = "idempotency-key-expires-at";
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const DAY_MS = 86_400_000;

let paydb: string;
let svcA: ServiceProcess;
let svcB: ServiceProcess;
let svcS: ServiceProcess;
let a: ReturnType<typeof clients>;
let b: ReturnType<typeof clients>;
let s: ReturnType<typeof clients>;

beforeAll(async () => {
  paydb = await createPaydb();
  [svcA, svcB, svcS] = await Promise.all([
    startPayouts(paydb, { PAYOUTS_DEFAULT_CLIENT_ID: "client-a" }, "payouts-a"),
    startPayouts(paydb, { PAYOUTS_DEFAULT_CLIENT_ID: "client-b" }, "payouts-b"),
    startPayouts(
      paydb,
      {
        PAYOUTS_DEFAULT_CLIENT_ID: "client-a",
        IDEMPOTENCY_RETENTION_MS: "1500",
        IDEMPOTENCY_LOCK_MS: "500",
        IDEMPOTENCY_RETENTION_MIN_OVERRIDE: "true",
        IDEMPOTENCY_PURGE_INTERVAL_MS: "200",
      },
      "payouts-short",
    ),
  ]);
  a = clients(svcA.url);
  b = clients(svcB.url);
  s = clients(svcS.url);
});

afterAll(async () => {
  a?.close();
  b?.close();
  s?.close();
  await Promise.all([svcA?.stop(5000), svcB?.stop(5000), svcS?.stop(5000)]);
  if (paydb) await dropPaydb(paydb);
});

async function refusal(p: Promise<unknown>): Promise<{ code: Code; reason: string }> {
  try {
    await p;
  } catch (err) {
    const ce = ConnectError.from(err);
    return { code: ce.code, reason: errorReason(ce) };
  }
  throw new Error("expected a refusal, got an answer");
}

describe("idempotency-key-expires-at", () => {
  it("a new payout and its replay carry the instant the server forgets the key, over both encodings", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-expiry" });
    const before = Date.now();
    const first = await create(a.grpc, req, key);
    const after = Date.now();
    expect(first.error).toBeUndefined();
    const header = first.headers.get(EXPIRES_HEADER);
    expect(header, "header on a new payout").toMatch(RFC3339_UTC);
    const at = Date.parse(header!);
    // Retention is counted from the success: inside the call's window plus 24 h (1 s of clock slack).
    expect(at).toBeGreaterThanOrEqual(before + DAY_MS - 1000);
    expect(at).toBeLessThanOrEqual(after + DAY_MS + 1000);
    // ...and it is exactly what paydb will purge by (to the millisecond, never later).
    const row = await keyRow(paydb, key);
    const stored = (row!.expires_at as Date).getTime();
    expect(at).toBe(stored);

    const replay = await create(a.json, req, key);
    expect(replay.replayed).toBe(true);
    expect(replay.headers.get(EXPIRES_HEADER), "header on a replay").toBe(header);
  });

  it("a reused key's refusal says until when the key stays bound to its first body", async () => {
    const key = newKey();
    const first = await create(a.grpc, validRequest({ accountId: "acct-expiry" }), key);
    const reused = await create(a.grpc, validRequest({ accountId: "acct-expiry-other" }), key);
    expect(reused.reason).toBe("IDEMPOTENCY_KEY_REUSED");
    expect(first.headers.get(EXPIRES_HEADER)).toMatch(RFC3339_UTC);
    expect(reused.headers.get(EXPIRES_HEADER)).toBe(first.headers.get(EXPIRES_HEADER));
  });

  it("a short (test-only) retention shows in the header", async () => {
    const before = Date.now();
    const r = await create(s.grpc, validRequest({ accountId: "acct-expiry-short" }), newKey());
    expect(r.error).toBeUndefined();
    const at = Date.parse(r.headers.get(EXPIRES_HEADER) ?? "");
    expect(at).toBeGreaterThanOrEqual(before + 1500 - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1500 + 1000);
  });
});

describe("LookupPayout", () => {
  it("finds a payout by idempotency key and by client reference, for its own client only", async () => {
    const key = newKey();
    const ref = `lookup-${newKey()}`;
    const made = await create(a.grpc, validRequest({ accountId: "acct-lookup", clientReference: ref }), key);
    const id = made.response!.payout!.payoutId;

    expect((await a.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } })).payout!.payoutId).toBe(id);
    expect((await a.json.lookupPayout({ by: { case: "clientReference", value: ref } })).payout!.payoutId).toBe(id);
    expect((await a.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } })).payout).toMatchObject({
      accountId: "acct-lookup",
      clientReference: ref,
    });

    // Another client: indistinguishable from a missing payout, by either field.
    expect(await refusal(b.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } }))).toEqual({ code: Code.NotFound, reason: "PAYOUT_NOT_FOUND" });
    expect(await refusal(b.json.lookupPayout({ by: { case: "clientReference", value: ref } }))).toEqual({ code: Code.NotFound, reason: "PAYOUT_NOT_FOUND" });
    expect(await refusal(a.grpc.lookupPayout({ by: { case: "idempotencyKey", value: newKey() } }))).toEqual({
      code: Code.NotFound,
      reason: "PAYOUT_NOT_FOUND",
    });
  });

  it("refuses a lookup by nothing, by an invalid key or by an empty reference", async () => {
    expect(await refusal(a.grpc.lookupPayout({}))).toEqual({ code: Code.InvalidArgument, reason: "FIELD_REQUIRED" });
    expect(await refusal(a.grpc.lookupPayout({ by: { case: "idempotencyKey", value: "has space" } }))).toEqual({
      code: Code.InvalidArgument,
      reason: "IDEMPOTENCY_KEY_INVALID",
    });
    expect(await refusal(a.grpc.lookupPayout({ by: { case: "idempotencyKey", value: "" } }))).toEqual({ code: Code.InvalidArgument, reason: "FIELD_REQUIRED" });
    expect(await refusal(a.grpc.lookupPayout({ by: { case: "clientReference", value: "" } }))).toEqual({
      code: Code.InvalidArgument,
      reason: "FIELD_REQUIRED",
    });
    expect(await refusal(a.grpc.lookupPayout({ by: { case: "clientReference", value: "x".repeat(129) } }))).toEqual({
      code: Code.InvalidArgument,
      reason: "FIELD_TOO_LONG",
    });
  });

  it("a client reference shared by two of the caller's payouts is refused as ambiguous, never answered with one of them", async () => {
    const ref = `dup-${newKey()}`;
    await create(a.grpc, validRequest({ accountId: "acct-dup", clientReference: ref }), newKey());
    await create(a.grpc, validRequest({ accountId: "acct-dup", clientReference: ref }), newKey());
    expect(await refusal(a.grpc.lookupPayout({ by: { case: "clientReference", value: ref } }))).toEqual({
      code: Code.FailedPrecondition,
      reason: "CLIENT_REFERENCE_AMBIGUOUS",
    });
    // Another client's payout with the same reference does not make the caller's ambiguous.
    const ref2 = `shared-${newKey()}`;
    const mine = await create(a.grpc, validRequest({ accountId: "acct-dup", clientReference: ref2 }), newKey());
    await create(b.grpc, validRequest({ accountId: "acct-dup", clientReference: ref2 }), newKey());
    expect((await a.grpc.lookupPayout({ by: { case: "clientReference", value: ref2 } })).payout!.payoutId).toBe(mine.response!.payout!.payoutId);
  });

  it("still finds the payout after the key's retention ended and the purge job deleted the key", async () => {
    const key = newKey();
    const made = await create(s.grpc, validRequest({ accountId: "acct-purged" }), key);
    expect(made.error).toBeUndefined();
    await eventually(async () => (await keyRow(paydb, key)) === undefined, "the purge of the expired key");
    expect(await sql(paydb, "SELECT 1 FROM idempotency_keys WHERE idempotency_key = $1", [key])).toHaveLength(0);

    const found = await s.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } });
    expect(found.payout!.payoutId).toBe(made.response!.payout!.payoutId);
    // The same client through the other process too, and still not another client.
    expect((await a.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } })).payout!.payoutId).toBe(made.response!.payout!.payoutId);
    expect((await refusal(b.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } }))).code).toBe(Code.NotFound);
  });

  it("a key used again after its retention names the newest payout it made", async () => {
    const key = newKey();
    const first = await create(s.grpc, validRequest({ accountId: "acct-reused-later" }), key);
    expect(first.error).toBeUndefined();
    await eventually(async () => (await keyRow(paydb, key)) === undefined, "the purge of the expired key");
    const second = await create(s.grpc, validRequest({ accountId: "acct-reused-later" }), key);
    expect(second.error).toBeUndefined();
    expect(second.response!.payout!.payoutId).not.toBe(first.response!.payout!.payoutId);
    expect((await s.grpc.lookupPayout({ by: { case: "idempotencyKey", value: key } })).payout!.payoutId).toBe(second.response!.payout!.payoutId);
  });
});
