/**
 * The IN_PROGRESS marker's lease (IDEMPOTENCY_LOCK_MS, 1 s here): a request that crashed frees
 * its key when the lease ends, and a request that merely outlived its lease can never create
 * a second payout once another request has taken the key over.
 */
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, eventually, keyRow, metric, newKey, sql, startPayouts, validRequest } from "./support.js";

let paydb: string;
let svc: ServiceProcess;
let c: ReturnType<typeof clients>;
let blocker: pg.Client | undefined;

beforeAll(async () => {
  paydb = await createPaydb();
  svc = await startPayouts(paydb, { IDEMPOTENCY_LOCK_MS: "1000" });
  c = clients(svc.url);
});

afterEach(async () => {
  await blocker?.query("ROLLBACK").catch(() => {});
  await blocker?.end().catch(() => {});
  blocker = undefined;
});

afterAll(async () => {
  c?.close();
  await svc?.stop(5000);
  if (paydb) await dropPaydb(paydb);
});

/** Makes every payout insert wait (inside its transaction) until releaseInserts(). */
async function holdInserts(): Promise<void> {
  blocker = new pg.Client({ connectionString: paydb });
  await blocker.connect();
  await blocker.query("BEGIN");
  await blocker.query("LOCK TABLE payouts IN EXCLUSIVE MODE");
}

async function releaseInserts(): Promise<void> {
  await blocker!.query("COMMIT");
}

const leaseExpired = (key: string) => async () => {
  const rows = await sql<{ expired: boolean }>(paydb, "SELECT locked_until <= now() AS expired FROM idempotency_keys WHERE idempotency_key = $1", [key]);
  return rows[0]?.expired === true;
};

describe("the in-progress marker's lease", () => {
  it("when the service crashes mid-request, the key is taken over after the lease and runs once", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-crash" });
    await holdInserts();
    const doomed = create(c.grpc, req, key);
    await eventually(async () => (await keyRow(paydb, key))?.state === "IN_PROGRESS", "the claim");

    await svc.restart(); // SIGKILL mid-request, then start again on the same ports
    c.close();
    c = clients(svc.url);
    expect((await doomed).error).toBeDefined();
    await releaseInserts(); // the killed request's transaction can now only roll back

    // While the lease runs, the key is still "in progress".
    const early = await create(c.grpc, req, key);
    if (early.error) expect(early.reason).toBe("IDEMPOTENCY_CONFLICT");
    await eventually(async () => (await leaseExpired(key)()) || (await keyRow(paydb, key))?.state === "DONE", "the lease to expire");

    const takeovers = await metric(svc.ready!.metricsPort, "idempotency_takeovers_total");
    const r = await create(c.grpc, req, key);
    expect(r.error).toBeUndefined();
    const replay = await create(c.grpc, req, key);
    expect(replay.replayed).toBe(true);
    expect(replay.response!.payout!.payoutId).toBe(r.response!.payout!.payoutId);
    expect(await countPayouts(paydb, "account_id = 'acct-crash'")).toBe(1);
    if (!early.response) expect(await metric(svc.ready!.metricsPort, "idempotency_takeovers_total")).toBe(takeovers + 1);
  });

  it("when a slow request's lease is taken over, only the new holder creates the payout; the slow one gets IDEMPOTENCY_CONFLICT", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-slow" });
    await holdInserts();
    const slow = create(c.grpc, req, key);
    await eventually(async () => (await keyRow(paydb, key))?.state === "IN_PROGRESS", "the slow request's claim");
    const slowClaim = (await keyRow(paydb, key))!.claim_id;
    await eventually(leaseExpired(key), "the slow request's lease to expire");

    const fast = create(c.grpc, req, key);
    await eventually(async () => (await keyRow(paydb, key))?.claim_id !== slowClaim, "the takeover");
    await releaseInserts(); // both now insert; only the holder of the current claim may commit

    const [s, f] = await Promise.all([slow, fast]);
    expect(f.error).toBeUndefined();
    expect(s.error?.code).toBe(Code.Aborted);
    expect(s.reason).toBe("IDEMPOTENCY_CONFLICT");
    expect(await countPayouts(paydb, "account_id = 'acct-slow'")).toBe(1);
    // The slow client's retry gets the winner's answer.
    const retry = await create(c.grpc, req, key);
    expect(retry.replayed).toBe(true);
    expect(retry.response!.payout!.payoutId).toBe(f.response!.payout!.payoutId);
  });
});
