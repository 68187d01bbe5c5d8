/**
 * The IN_PROGRESS marker's lease (IDEMPOTENCY_LOCK_MS): a request that crashed frees its key
 * when the lease ends, and a request that merely outlived its lease can never create a second
 * payout once another request has taken the key over.
 *
 * The crash case runs on its own process with a 15 s lease, so that a SIGKILL and restart on a
 * loaded machine still leaves the lease running when the retry arrives (every assertion runs,
 * and the test says so if the restart ever took longer); the slow-request case uses 1 s.
 *
 * The lease belongs to the stepwise path, which commits its marker before the work: these
 * processes get a limit store of their own (LIMITS_DB_URL, here paydb itself), which selects it.
 * The one-statement path has no marker to outlive (decision 071): its key, payout and answer
 * commit together or not at all (one-statement.test.ts).
 */
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, eventually, keyRow, metric, newKey, sql, startPayouts, validRequest } from "./support.js";

let paydb: string;
let svc: ServiceProcess;
let c: ReturnType<typeof clients>;
let crashSvc: ServiceProcess;
let crashC: ReturnType<typeof clients>;
let blocker: pg.Client | undefined;

const CRASH_LEASE_MS = 15_000;

beforeAll(async () => {
  paydb = await createPaydb();
  [svc, crashSvc] = await Promise.all([
    startPayouts(paydb, { IDEMPOTENCY_LOCK_MS: "1000", LIMITS_DB_URL: paydb }),
    startPayouts(paydb, { IDEMPOTENCY_LOCK_MS: String(CRASH_LEASE_MS), LIMITS_DB_URL: paydb }, "payouts-crash"),
  ]);
  c = clients(svc.url);
  crashC = clients(crashSvc.url);
});

afterEach(async () => {
  await blocker?.query("ROLLBACK").catch(() => {});
  await blocker?.end().catch(() => {});
  blocker = undefined;
});

afterAll(async () => {
  c?.close();
  crashC?.close();
  await Promise.all([svc?.stop(5000), crashSvc?.stop(5000)]);
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

const leaseRemainingMs = async (key: string): Promise<number> => {
  const rows = await sql<{ ms: number }>(
    paydb,
    "SELECT (extract(epoch FROM locked_until - now()) * 1000)::float8 AS ms FROM idempotency_keys WHERE idempotency_key = $1",
    [key],
  );
  return rows[0]?.ms ?? Number.NaN;
};

const leaseExpired = (key: string) => async () => {
  const rows = await sql<{ expired: boolean }>(paydb, "SELECT locked_until <= now() AS expired FROM idempotency_keys WHERE idempotency_key = $1", [key]);
  return rows[0]?.expired === true;
};

describe("the in-progress marker's lease", () => {
  it("when the service crashes mid-request, the key is taken over after the lease and runs once", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-crash" });
    await holdInserts();
    const doomed = create(crashC.grpc, req, key);
    await eventually(async () => (await keyRow(paydb, key))?.state === "IN_PROGRESS", "the claim");

    await crashSvc.restart(); // SIGKILL mid-request, then start again on the same ports
    crashC.close();
    crashC = clients(crashSvc.url);
    expect((await doomed).error).toBeDefined();
    await releaseInserts(); // the killed request's transaction can now only roll back
    const claimed = (await keyRow(paydb, key))!.claim_id;

    // While the lease runs, the key is still "in progress": the retry is refused, and changes nothing.
    // (Not a skipped branch: if the restart ever outlived most of the lease, this says so.)
    expect(await leaseRemainingMs(key), "lease left after the restart (ms)").toBeGreaterThan(2000);
    const early = await create(crashC.grpc, req, key);
    expect(early.error?.code).toBe(Code.Aborted);
    expect(early.reason).toBe("IDEMPOTENCY_CONFLICT");
    expect(await keyRow(paydb, key)).toMatchObject({ state: "IN_PROGRESS", claim_id: claimed });
    expect(await countPayouts(paydb, "account_id = 'acct-crash'")).toBe(0);

    await eventually(leaseExpired(key), "the lease to expire", CRASH_LEASE_MS + 10_000);
    const takeovers = await metric(crashSvc.ready!.metricsPort, "railfence_payouts_idempotency_takeovers_total");
    const r = await create(crashC.grpc, req, key);
    expect(r.error).toBeUndefined();
    expect(r.replayed).toBe(false);
    // The dead marker was taken over (not a fresh key), exactly once.
    expect(await metric(crashSvc.ready!.metricsPort, "railfence_payouts_idempotency_takeovers_total")).toBe(takeovers + 1);
    const replay = await create(crashC.grpc, req, key);
    expect(replay.replayed).toBe(true);
    expect(replay.response!.payout!.payoutId).toBe(r.response!.payout!.payoutId);
    expect(await countPayouts(paydb, "account_id = 'acct-crash'")).toBe(1);
  }, 90_000);

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
