/**
 * CreatePayout in one statement (decision 071): a new payout costs paydb one round trip and one
 * commit (both counted on the wire, on a paydb nothing else uses), and the
 * statement keeps the contract at its edges: a replay answers while the limits are exhausted, a
 * limit refusal writes nothing at all, and concurrent requests with one key make one payout.
 * The stepwise path (a limit store of its own, LIMITS_DB_URL) is measured beside it.
 */
import { Code } from "@connectrpc/connect";
import { create as message, toBinary } from "@bufbuild/protobuf";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreatePayoutResponseSchema } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { PgRoundTripCounter } from "../support/pg-round-trips.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, eventually, keyRow, newKey, sql, startPayouts, validRequest } from "./support.js";

let paydb: string;
let counter: PgRoundTripCounter;
const started: ServiceProcess[] = [];
const sessions: Array<ReturnType<typeof clients>> = [];

beforeAll(async () => {
  paydb = await createPaydb();
  counter = await PgRoundTripCounter.start(Number(new URL(paydb).port));
});

afterAll(async () => {
  for (const s of sessions) s.close();
  await Promise.all(started.map((p) => p.stop(5000)));
  await counter?.close();
  if (paydb) await dropPaydb(paydb);
});

async function payouts(env: Record<string, string>, name: string): Promise<{ svc: ServiceProcess; c: ReturnType<typeof clients> }> {
  const svc = await startPayouts(paydb, { IDEMPOTENCY_PURGE_INTERVAL_MS: "86400000", ...env }, name);
  started.push(svc);
  const c = clients(svc.url);
  sessions.push(c);
  return { svc, c };
}

const viaCounter = () => paydb.replace(`:${new URL(paydb).port}/`, `:${counter.port}/`);

/**
 * Round trips and commits on paydb per CreatePayout of a new key, as the wire shows them (the
 * counter sees every statement the service sends and every transaction the server ends). Counted
 * on the wire rather than from pg_stat_database.xact_commit: autovacuum commits on paydb too, at
 * moments no test chooses, and once made this count negative under load.
 */
async function measure(env: Record<string, string>, account: string, k: number): Promise<{ roundTrips: number; commits: number }> {
  const svc = await startPayouts(paydb, { IDEMPOTENCY_PURGE_INTERVAL_MS: "86400000", ...env }, "payouts-cost");
  const c = clients(svc.url);
  try {
    // Warm-up: every pool has its connection and every statement is prepared.
    expect((await create(c.grpc, validRequest({ accountId: account }), newKey())).error).toBeUndefined();
    const before = { trips: counter.roundTrips, commits: counter.commits, rollbacks: counter.rollbacks };
    for (let i = 0; i < k; i++) {
      const r = await create(c.grpc, validRequest({ accountId: account }), newKey());
      expect(r.error, r.error?.rawMessage).toBeUndefined();
    }
    expect(counter.rollbacks - before.rollbacks, "no transaction rolled back").toBe(0);
    return { roundTrips: (counter.roundTrips - before.trips) / k, commits: (counter.commits - before.commits) / k };
  } finally {
    c.close();
    await svc.stop(5000);
  }
}

describe("what one CreatePayout costs paydb", () => {
  const K = 10;

  it("one round trip and one commit per new payout (limits in paydb)", async () => {
    const cost = await measure({ PAYDB_URL: viaCounter() }, "acct-cost-one", K);
    expect(cost).toEqual({ roundTrips: 1, commits: 1 });
  }, 90_000);

  it("stepwise (a limit store of its own): six round trips and three commits per new payout", async () => {
    const cost = await measure({ PAYDB_URL: viaCounter(), LIMITS_DB_URL: viaCounter() }, "acct-cost-steps", K);
    // claim (commit), consume (commit), BEGIN, insert, pin, COMMIT
    expect(cost).toEqual({ roundTrips: 6, commits: 3 });
  }, 90_000);
});

describe("the one statement at the contract's edges", () => {
  let one: { svc: ServiceProcess; c: ReturnType<typeof clients> };
  beforeAll(async () => {
    one = await payouts(
      {
        PAYOUTS_DEFAULT_CLIENT_ID: "client-edges",
        LIMIT_CLIENT_REQUESTS: "1000",
        LIMIT_CLIENT_WINDOW_MS: "86400000",
        LIMIT_ACCOUNT_DAILY_AMOUNT: "EUR=1000,*=off",
      },
      "payouts-edges",
    );
  });

  const usage = async () =>
    await sql<{ scope: string; subject: string; used: string }>(
      paydb,
      "SELECT scope, subject, used::text FROM payout_limit_usage WHERE subject LIKE 'client-edges%' ORDER BY 1, 2",
    );

  it("answers with the payout's timestamps as every read does (paydb appends them to the stored answer)", async () => {
    const r = await create(one.c.grpc, validRequest({ accountId: "acct-edges-ts", amount: { amountMinor: 1n, currency: "EUR" } }), newKey());
    expect(r.error).toBeUndefined();
    const read = await one.c.grpc.getPayout({ payoutId: r.response!.payout!.payoutId });
    expect(toBinary(CreatePayoutResponseSchema, r.response!)).toEqual(
      toBinary(CreatePayoutResponseSchema, message(CreatePayoutResponseSchema, { payout: read.payout })),
    );
    expect(r.response!.payout!.createdAt).toEqual(r.response!.payout!.updatedAt);
  });

  it("a replay answers while the daily amount is exhausted, and is not counted again", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-edges-replay", amount: { amountMinor: 1000n, currency: "EUR" } });
    const first = await create(one.c.grpc, req, key);
    expect(first.error).toBeUndefined();
    const refused = await create(one.c.grpc, validRequest({ accountId: "acct-edges-replay", amount: { amountMinor: 1n, currency: "EUR" } }), newKey());
    expect(refused.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
    const spent = await usage();

    const replay = await create(one.c.json, req, key);
    expect(replay.error).toBeUndefined();
    expect(replay.replayed).toBe(true);
    expect(replay.response!.payout!.payoutId).toBe(first.response!.payout!.payoutId);
    expect(await usage()).toEqual(spent);
    expect(await countPayouts(paydb, "account_id = 'acct-edges-replay'")).toBe(1);
  });

  it("a limit refusal writes nothing: no key, no payout, no usage", async () => {
    expect(
      (await create(one.c.grpc, validRequest({ accountId: "acct-edges-none", amount: { amountMinor: 600n, currency: "EUR" } }), newKey())).error,
    ).toBeUndefined();
    const before = await usage();
    const key = newKey();
    const refused = await create(one.c.grpc, validRequest({ accountId: "acct-edges-none", amount: { amountMinor: 500n, currency: "EUR" } }), key);
    expect(refused.error?.code).toBe(Code.ResourceExhausted);
    expect(refused.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
    expect(await keyRow(paydb, key)).toBeUndefined();
    expect(await countPayouts(paydb, "account_id = 'acct-edges-none'")).toBe(1);
    // Not even the request rate it passed before the amount refused it.
    expect(await usage()).toEqual(before);
  });

  it("20 concurrent requests with one key: one payout; every answer is that payout or IDEMPOTENCY_CONFLICT", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-edges-race", amount: { amountMinor: 2n, currency: "EUR" } });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => create(i % 2 ? one.c.json : one.c.grpc, req, key)));
    expect(await countPayouts(paydb, "account_id = 'acct-edges-race'")).toBe(1);
    const stored = (await keyRow(paydb, key))!;
    for (const a of answers) {
      if (a.error) expect(a.reason).toBe("IDEMPOTENCY_CONFLICT");
      else expect(a.response!.payout!.payoutId).toBe(stored.payout_id);
    }
    expect(answers.filter((a) => !a.error && !a.replayed)).toHaveLength(1);
  });

  it("a request with the key of one in progress is refused at once, without waiting for it", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-edges-held", amount: { amountMinor: 3n, currency: "EUR" } });
    const blocker = new pg.Client({ connectionString: paydb });
    await blocker.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query("LOCK TABLE payouts IN EXCLUSIVE MODE");
      const first = create(one.c.grpc, req, key);
      await eventually(
        async () => (await sql(paydb, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%create_payout(%'")).length === 1,
        "the first request to wait inside its statement",
      );
      const startedAt = Date.now();
      const second = await create(one.c.grpc, req, key);
      expect(second.reason).toBe("IDEMPOTENCY_CONFLICT");
      expect(Date.now() - startedAt).toBeLessThan(1000);
      await blocker.query("COMMIT");
      expect((await first).error).toBeUndefined();
      expect((await create(one.c.grpc, req, key)).replayed).toBe(true);
      expect(await countPayouts(paydb, "account_id = 'acct-edges-held'")).toBe(1);
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
    }
  });
});
