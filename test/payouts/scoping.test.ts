/**
 * Keys (and payouts) are scoped to the calling client: two services with different default
 * client identities on ONE paydb never see each other's keys, answers or payouts.
 */
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, newKey, startPayouts, validRequest } from "./support.js";

let paydb: string;
let svcA: ServiceProcess;
let svcB: ServiceProcess;
let a: ReturnType<typeof clients>;
let b: ReturnType<typeof clients>;

beforeAll(async () => {
  paydb = await createPaydb();
  [svcA, svcB] = await Promise.all([
    startPayouts(paydb, { PAYOUTS_DEFAULT_CLIENT_ID: "client-a" }, "payouts-a"),
    startPayouts(paydb, { PAYOUTS_DEFAULT_CLIENT_ID: "client-b" }, "payouts-b"),
  ]);
  a = clients(svcA.url);
  b = clients(svcB.url);
});

afterAll(async () => {
  a?.close();
  b?.close();
  await Promise.all([svcA?.stop(5000), svcB?.stop(5000)]);
  if (paydb) await dropPaydb(paydb);
});

describe("per-client scoping", () => {
  it("the same key from two clients is two keys: each runs once, neither reads the other's answer", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-shared" });
    const fromA = await create(a.grpc, req, key);
    const fromB = await create(b.grpc, req, key);
    expect(fromA.error).toBeUndefined();
    expect(fromB.error).toBeUndefined();
    expect(fromB.replayed).toBe(false);
    expect(fromB.response!.payout!.payoutId).not.toBe(fromA.response!.payout!.payoutId);
    expect(await countPayouts(paydb, "account_id = 'acct-shared'")).toBe(2);
    expect(await countPayouts(paydb, "client_id = 'client-a' AND payout_id = $1", [fromA.response!.payout!.payoutId])).toBe(1);
    expect(await countPayouts(paydb, "client_id = 'client-b' AND payout_id = $1", [fromB.response!.payout!.payoutId])).toBe(1);

    // Each client's replay is its own answer.
    expect((await create(a.grpc, req, key)).response!.payout!.payoutId).toBe(fromA.response!.payout!.payoutId);
    expect((await create(b.grpc, req, key)).response!.payout!.payoutId).toBe(fromB.response!.payout!.payoutId);
  });

  it("a key one client bound to a body is free for another client's different body (no KEY_REUSED across clients)", async () => {
    const key = newKey();
    expect((await create(a.grpc, validRequest({ accountId: "acct-x" }), key)).error).toBeUndefined();
    const other = await create(b.grpc, validRequest({ accountId: "acct-y" }), key);
    expect(other.error).toBeUndefined();
    expect(other.replayed).toBe(false);
    // ...while the same client reusing it with another body is refused.
    expect((await create(a.grpc, validRequest({ accountId: "acct-z" }), key)).reason).toBe("IDEMPOTENCY_KEY_REUSED");
  });

  it("reads are scoped too: another client's payout is NOT_FOUND and absent from its list", async () => {
    const made = await create(a.grpc, validRequest({ accountId: "acct-private" }), newKey());
    const id = made.response!.payout!.payoutId;
    expect((await a.grpc.getPayout({ payoutId: id })).payout!.payoutId).toBe(id);
    await expect(b.grpc.getPayout({ payoutId: id })).rejects.toMatchObject({ code: Code.NotFound });
    const listB = await b.grpc.listPayouts({ accountId: "acct-private" });
    expect(listB.payouts).toHaveLength(0);
    const listA = await a.grpc.listPayouts({ accountId: "acct-private" });
    expect(listA.payouts.map((p) => p.payoutId)).toEqual([id]);
  });
});
