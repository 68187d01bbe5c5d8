/**
 * Fail-closed money limits on CreatePayout, against real payouts processes and a real paydb:
 * the per-client rate and the per-account daily amount are enforced across replicas through
 * the shared store, a refusal is RESOURCE_EXHAUSTED with a reason and RetryInfo and consumes
 * nothing, a replay of a stored success is never refused nor counted, and with the store
 * unreachable (a TCP proxy in front of it refuses or black-holes) money movement refuses with
 * UNAVAILABLE LIMITS_UNAVAILABLE while reads keep working. The daily amount is a budget per
 * client and account: one client neither spends nor sees another's. A counter locked by another
 * request is waited for (bounded), then refused as contention, never as an outage.
 */
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { RetryInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, keyRow, metric, newKey, sql, startPayouts, validRequest } from "./support.js";
import { letTimePass } from "../support/time.js";

let paydb: string;
const started: ServiceProcess[] = [];
const sessions: Array<ReturnType<typeof clients>> = [];

beforeAll(async () => {
  paydb = await createPaydb();
});

afterAll(async () => {
  for (const s of sessions) s.close();
  await Promise.all(started.map((p) => p.stop(5000)));
  if (paydb) await dropPaydb(paydb);
});

async function payouts(env: Record<string, string>, name = "payouts"): Promise<{ svc: ServiceProcess; c: ReturnType<typeof clients> }> {
  const svc = await startPayouts(paydb, env, name);
  started.push(svc);
  const c = clients(svc.url);
  sessions.push(c);
  return { svc, c };
}

const retryMs = (err: unknown) => {
  const d = (err as { findDetails(s: typeof RetryInfoSchema): Array<{ retryDelay?: { seconds: bigint; nanos: number } }> }).findDetails(RetryInfoSchema)[0]
    ?.retryDelay;
  return d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : undefined;
};

async function usage(scope: string, subject: string): Promise<number> {
  const rows = await sql<{ used: string }>(paydb, "SELECT coalesce(sum(used), 0) AS used FROM payout_limit_usage WHERE scope = $1 AND subject = $2", [
    scope,
    subject,
  ]);
  return Number(rows[0]!.used);
}

describe("per-client rate limit", () => {
  it("refuses the request past the limit with RESOURCE_EXHAUSTED CLIENT_RATE_LIMITED and RetryInfo; it consumes nothing and frees its key", async () => {
    // A day-long window: the test cannot straddle a window boundary by accident.
    const { svc, c } = await payouts({ PAYOUTS_DEFAULT_CLIENT_ID: "client-rate", LIMIT_CLIENT_REQUESTS: "3", LIMIT_CLIENT_WINDOW_MS: "86400000" });
    const keys = [newKey(), newKey(), newKey()];
    const first = [];
    for (const key of keys) {
      const r = await create(c.grpc, validRequest({ accountId: "acct-rate" }), key);
      expect(r.error).toBeUndefined();
      first.push(r);
    }
    const key = newKey();
    const refused = await create(c.json, validRequest({ accountId: "acct-rate" }), key);
    expect(refused.error?.code).toBe(Code.ResourceExhausted);
    expect(refused.reason).toBe("CLIENT_RATE_LIMITED");
    expect(errorInfo(refused.error)?.metadata).toMatchObject({ limit: "client_rate", limit_value: "3", used: "3" });
    expect(retryMs(refused.error)).toBeGreaterThan(0);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await countPayouts(paydb, "account_id = 'acct-rate'")).toBe(3);
    expect(await usage("client_rate", "client-rate")).toBe(3);
    expect(await keyRow(paydb, key)).toBeUndefined(); // errors are not pinned
    expect(await metric(svc.ready!.metricsPort, "railfence_payouts_limit_refusals_total")).toBe(1);

    // Over the limit, a replay of a stored success is still answered, and not counted.
    const replay = await create(c.grpc, validRequest({ ...stripSeq(first[0]!.response!.payout!) }), keys[0]);
    expect(replay.error).toBeUndefined();
    expect(replay.replayed).toBe(true);
    expect(replay.response!.payout!.payoutId).toBe(first[0]!.response!.payout!.payoutId);
    expect(await usage("client_rate", "client-rate")).toBe(3);
  });

  it("opens again in the next window: the refused key then runs once", async () => {
    const { c } = await payouts({ PAYOUTS_DEFAULT_CLIENT_ID: "client-window", LIMIT_CLIENT_REQUESTS: "1", LIMIT_CLIENT_WINDOW_MS: "2000" });
    // Start right after a window boundary so the two calls share a window.
    await letTimePass(2000 - (Date.now() % 2000) + 50, "the next 2 s window starts");
    expect((await create(c.grpc, validRequest({ accountId: "acct-window" }), newKey())).error).toBeUndefined();
    const key = newKey();
    const req = validRequest({ accountId: "acct-window" });
    const refused = await create(c.grpc, req, key);
    expect(refused.reason).toBe("CLIENT_RATE_LIMITED");
    const wait = retryMs(refused.error)!;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(2000);
    await letTimePass(wait + 100, "the announced Retry-After passes");
    const after = await create(c.grpc, req, key);
    expect(after.error).toBeUndefined();
    expect(after.replayed).toBe(false);
    expect(await countPayouts(paydb, "account_id = 'acct-window'")).toBe(2);
  });
});

/** The request fields of a created payout (to replay it with the same body). */
function stripSeq(p: { accountId: string; amount?: { amountMinor: bigint; currency: string }; beneficiary: string; clientReference: string }) {
  return {
    accountId: p.accountId,
    amount: p.amount ? { amountMinor: p.amount.amountMinor, currency: p.amount.currency } : undefined,
    beneficiary: p.beneficiary,
    clientReference: p.clientReference,
  };
}

describe("per-account daily amount limit", () => {
  it("is one budget across replicas: concurrent creates on two processes never exceed it", async () => {
    const env = { PAYOUTS_DEFAULT_CLIENT_ID: "client-amount", LIMIT_ACCOUNT_DAILY_AMOUNT: "EUR=1000,*=off" };
    const a = await payouts(env, "payouts-a");
    const b = await payouts(env, "payouts-b");
    // 20 payouts of 150 EUR-cents at once, half on each replica: exactly 6 fit in 1000.
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        create((i % 2 ? a : b).c.grpc, validRequest({ accountId: "acct-amount", amount: { amountMinor: 150n, currency: "EUR" } }), newKey()),
      ),
    );
    const ok = results.filter((r) => !r.error);
    const refused = results.filter((r) => r.error);
    expect(ok).toHaveLength(6);
    for (const r of refused) {
      expect(r.error!.code).toBe(Code.ResourceExhausted);
      expect(r.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
      expect(errorInfo(r.error)?.metadata).toMatchObject({
        limit: "account_daily_amount",
        account_id: "acct-amount",
        currency: "EUR",
        limit_value: "1000",
        requested: "150",
      });
      expect(retryMs(r.error)).toBeGreaterThan(0); // until the next UTC day
    }
    expect(await countPayouts(paydb, "account_id = 'acct-amount'")).toBe(6);
    const [sum] = await sql<{ total: string }>(paydb, "SELECT sum(amount_minor) AS total FROM payouts WHERE account_id = 'acct-amount'");
    expect(Number(sum!.total)).toBe(900);
    expect(await usage("account_daily_amount", "client-amount/acct-amount/EUR")).toBe(900);

    // The remaining 100 still fits; other accounts and currencies have their own budgets.
    expect(
      (await create(a.c.grpc, validRequest({ accountId: "acct-amount", amount: { amountMinor: 100n, currency: "EUR" } }), newKey())).error,
    ).toBeUndefined();
    expect(
      (await create(a.c.grpc, validRequest({ accountId: "acct-amount-2", amount: { amountMinor: 1000n, currency: "EUR" } }), newKey())).error,
    ).toBeUndefined();
    expect(
      (await create(b.c.grpc, validRequest({ accountId: "acct-amount", amount: { amountMinor: 10n ** 12n, currency: "USD" } }), newKey())).error,
    ).toBeUndefined(); // USD: off
  });

  it("refuses a payout larger than the whole daily limit as final: failed_precondition PAYOUT_ABOVE_DAILY_LIMIT, no retry hint", async () => {
    const { c } = await payouts({ PAYOUTS_DEFAULT_CLIENT_ID: "client-huge", LIMIT_ACCOUNT_DAILY_AMOUNT: "*=500" });
    const r = await create(c.grpc, validRequest({ accountId: "acct-huge", amount: { amountMinor: 501n, currency: "GBP" } }), newKey());
    expect(r.reason).toBe("PAYOUT_ABOVE_DAILY_LIMIT");
    expect(r.error?.code).toBe(Code.FailedPrecondition);
    expect(retryMs(r.error)).toBeUndefined();
    expect(await usage("account_daily_amount", "client-huge/acct-huge/GBP")).toBe(0);
  });

  it("gives the limits back when the payout was not created (the transaction failed after the consumption)", async () => {
    const { c } = await payouts({
      PAYOUTS_DEFAULT_CLIENT_ID: "client-refund",
      LIMIT_CLIENT_REQUESTS: "100",
      LIMIT_CLIENT_WINDOW_MS: "86400000",
      LIMIT_ACCOUNT_DAILY_AMOUNT: "*=1000",
    });
    await sql(
      paydb,
      `CREATE OR REPLACE FUNCTION test_refuse_refund() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN IF NEW.account_id = 'acct-refund' THEN RAISE EXCEPTION 'refused by test'; END IF; RETURN NEW; END $$`,
    );
    await sql(paydb, "CREATE TRIGGER test_refuse_refund BEFORE INSERT ON payouts FOR EACH ROW EXECUTE FUNCTION test_refuse_refund()");
    try {
      const r = await create(c.grpc, validRequest({ accountId: "acct-refund", amount: { amountMinor: 700n, currency: "EUR" } }), newKey());
      expect(r.error?.code).toBe(Code.Internal);
    } finally {
      await sql(paydb, "DROP TRIGGER test_refuse_refund ON payouts");
    }
    expect(await usage("account_daily_amount", "client-refund/acct-refund/EUR")).toBe(0);
    expect(await usage("client_rate", "client-refund")).toBe(0);
    // The whole budget is still there, and a payout that is created consumes it.
    expect((await create(c.grpc, validRequest({ accountId: "acct-refund", amount: { amountMinor: 1000n, currency: "EUR" } }), newKey())).error).toBeUndefined();
    expect(await usage("account_daily_amount", "client-refund/acct-refund/EUR")).toBe(1000);
    expect(await usage("client_rate", "client-refund")).toBe(1);
  });
});

describe("the daily amount is per client and account", () => {
  it("one client's spending neither uses up nor shows in another client's budget on the same account", async () => {
    const limits = { LIMIT_ACCOUNT_DAILY_AMOUNT: "EUR=1000,*=off" };
    const a = await payouts({ ...limits, PAYOUTS_DEFAULT_CLIENT_ID: "client-spender" }, "payouts-spender");
    const b = await payouts({ ...limits, PAYOUTS_DEFAULT_CLIENT_ID: "client-other" }, "payouts-other");
    const pay = (c: ReturnType<typeof clients>, amountMinor: bigint) =>
      create(c.grpc, validRequest({ accountId: "acct-two-clients", amount: { amountMinor, currency: "EUR" } }), newKey());

    // A spends 900 of the account's EUR day, then is refused for 200 more with its own usage.
    expect((await pay(a.c, 900n)).error).toBeUndefined();
    const aRefused = await pay(a.c, 200n);
    expect(aRefused.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
    expect(errorInfo(aRefused.error)?.metadata).toMatchObject({ used: "900", limit_value: "1000" });

    // B's budget on the same account is whole: its 1000 passes...
    expect((await pay(b.c, 1000n)).error).toBeUndefined();
    // ...and its refusal speaks of B's spending only, never of A's 900.
    const bRefused = await pay(b.c, 1n);
    expect(bRefused.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
    const meta = errorInfo(bRefused.error)?.metadata ?? {};
    expect(meta.used).toBe("1000");
    expect(Object.values(meta).join(" ")).not.toMatch(/1900|900|client-spender/);
    expect(bRefused.error!.rawMessage).not.toMatch(/1900|900|client-spender/);
    expect(await countPayouts(paydb, "account_id = 'acct-two-clients'")).toBe(2);
  });
});

describe("a hot counter is contention, not an outage", () => {
  let holder: pg.Client | undefined;
  afterAll(async () => {
    await holder?.end().catch(() => {});
  });

  it("a request waits (bounded) for a counter another transaction holds, then refuses LIMITS_CONTENDED, retryable, without paging", async () => {
    const { svc, c } = await payouts(
      { PAYOUTS_DEFAULT_CLIENT_ID: "client-hot", LIMIT_ACCOUNT_DAILY_AMOUNT: "*=1000000", LIMITS_TIMEOUT_MS: "500", LIMITS_LOCK_WAIT_MS: "1500" },
      "payouts-hot",
    );
    const req = () => validRequest({ accountId: "acct-hot", amount: { amountMinor: 10n, currency: "EUR" } });
    expect((await create(c.grpc, req(), newKey())).error).toBeUndefined(); // the counter row exists now

    // Another transaction holds the account's counter (as a long burst of creates would).
    holder = new pg.Client({ connectionString: paydb });
    await holder.connect();
    const lockCounter = async () => {
      await holder!.query("BEGIN");
      await holder!.query("SELECT used FROM payout_limit_usage WHERE scope = 'account_daily_amount' AND subject LIKE '%acct-hot/EUR' FOR UPDATE");
    };
    await lockCounter();

    // Held briefly (shorter than the wait): the request waits and succeeds.
    const release = setTimeout(() => void holder!.query("COMMIT"), 400);
    const waited = await create(c.grpc, req(), newKey());
    clearTimeout(release);
    expect(waited.error).toBeUndefined();

    // Held past the wait: a distinct, retryable refusal; nothing created, nothing consumed.
    await lockCounter();
    const key = newKey();
    const body = req();
    const before = await countPayouts(paydb, "account_id = 'acct-hot'");
    const started = Date.now();
    const refused = await create(c.grpc, body, key);
    expect(refused.reason).toBe("LIMITS_CONTENDED");
    expect(refused.error?.code).toBe(Code.Unavailable);
    expect(retryMs(refused.error)).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await metric(svc.ready!.metricsPort, "railfence_payouts_limit_store_unavailable_total")).toBe(0);
    expect(await metric(svc.ready!.metricsPort, "railfence_payouts_limit_contention_total")).toBe(1);
    expect(await keyRow(paydb, key)).toBeUndefined();
    await holder.query("COMMIT");
    expect(await countPayouts(paydb, "account_id = 'acct-hot'")).toBe(before);

    // The client's retry with the same key runs, once.
    const retried = await create(c.grpc, body, key);
    expect(retried.error).toBeUndefined();
    expect(retried.replayed).toBe(false);
    expect(await countPayouts(paydb, "account_id = 'acct-hot'")).toBe(before + 1);
  });
});

describe("limit store outage (fail closed)", () => {
  let proxy: TcpProxy;
  afterAll(async () => {
    await proxy?.close();
  });

  it.each(["refuse", "blackhole"] as const)(
    "store %s: CreatePayout refuses UNAVAILABLE LIMITS_UNAVAILABLE with a retry hint, reads and replays keep working, nothing is created",
    async (fault) => {
      const pgPort = Number(new URL(paydb).port);
      proxy = await TcpProxy.start(pgPort);
      const limitsUrl = paydb.replace(`:${pgPort}/`, `:${proxy.port}/`);
      const clientId = `client-outage-${fault}`;
      const account = `acct-outage-${fault}`;
      const { svc, c } = await payouts({
        PAYOUTS_DEFAULT_CLIENT_ID: clientId,
        LIMITS_DB_URL: limitsUrl,
        LIMITS_TIMEOUT_MS: "500",
        LIMIT_ACCOUNT_DAILY_AMOUNT: "*=100000",
      });
      const existingKey = newKey();
      const existingReq = validRequest({ accountId: account });
      const existing = await create(c.grpc, existingReq, existingKey);
      expect(existing.error).toBeUndefined();

      if (fault === "refuse") proxy.refuse();
      else proxy.blackhole();
      const key = newKey();
      const req = validRequest({ accountId: account });
      try {
        for (const client of [c.grpc, c.json]) {
          const started = Date.now();
          const refused = await create(client, req, key);
          expect(refused.error?.code).toBe(Code.Unavailable);
          expect(refused.reason).toBe("LIMITS_UNAVAILABLE");
          expect(retryMs(refused.error)).toBeGreaterThan(0);
          expect(refused.error!.rawMessage).not.toMatch(/127\.0\.0\.1|ECONN|timeout/i);
          // Bounded by LIMITS_TIMEOUT_MS (plus the connect attempt), not by the call's deadline.
          expect(Date.now() - started).toBeLessThan(5000);
        }
        // Reads never touch the limit store.
        expect((await c.grpc.getPayout({ payoutId: existing.response!.payout!.payoutId })).payout!.accountId).toBe(account);
        expect((await c.json.listPayouts({ accountId: account })).payouts).toHaveLength(1);
        // A replay of a stored success never touches it either.
        const replay = await create(c.grpc, existingReq, existingKey);
        expect(replay.replayed).toBe(true);
        expect(await metric(svc.ready!.metricsPort, "railfence_payouts_limit_store_unavailable_total")).toBe(2);
      } finally {
        proxy.heal();
      }
      expect(await countPayouts(paydb, "account_id = $1", [account])).toBe(1);
      expect(await keyRow(paydb, key)).toBeUndefined();

      // Healed: the client's retry with the same key runs, once.
      const after = await create(c.grpc, req, key);
      expect(after.error).toBeUndefined();
      expect(after.replayed).toBe(false);
      expect(await countPayouts(paydb, "account_id = $1", [account])).toBe(2);
      await proxy.close();
    },
  );
});
