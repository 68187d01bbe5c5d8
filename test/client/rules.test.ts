/**
 * RESILIENCE.md's rules for clients, one test each, for the client library against a real
 * payouts process (on its own PostgreSQL, which some tests stop). What the server saw comes from
 * its own log (one rpc_error line per refused attempt) and paydb, not from the library.
 */
import { Code } from "@connectrpc/connect";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileKeyStore, IntentExpiredError, IntentMismatchError, RailfenceError, type PayoutRequest } from "../../clients/typescript/src/index.js";
import { eventually } from "../support/clients.js";
import { claimed, countPayouts, holdPayoutInserts, library, payoutsOnOwnPostgres, refusals, type PayoutsFixture } from "./support.js";
import { letTimePass, quietFor } from "../support/time.js";

let f: PayoutsFixture;
let dir: string;
const closers: Array<() => void> = [];

beforeAll(async () => {
  f = await payoutsOnOwnPostgres({ LIMIT_ACCOUNT_DAILY_AMOUNT: "EUR=1000000,*=off" });
  dir = mkdtempSync(join(tmpdir(), "railfence-rules-"));
});

afterAll(async () => {
  for (const c of closers.splice(0)) c();
  await f?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function client(o: Parameters<typeof library>[1] = {}) {
  const rf = library(f.svc.url, o);
  closers.push(() => rf.close());
  return rf;
}

let seq = 0;
const req = (accountId: string, amountMinor = 100n + BigInt(++seq)): PayoutRequest => ({
  accountId,
  amount: { amountMinor, currency: "EUR" },
  beneficiary: "ben-rules",
  clientReference: `inv-${seq}`,
});
const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as RailfenceError,
  );

/** Runs fn with paydb stopped, starting it again after restartAfterMs (while fn may still run). */
async function withPaydbDown<T>(restartAfterMs: number | undefined, fn: () => Promise<T>): Promise<T> {
  await f.pg.stop("fast");
  const restart = restartAfterMs === undefined ? undefined : new Promise<void>((r) => setTimeout(r, restartAfterMs)).then(() => f.pg.startProcess());
  try {
    return await fn();
  } finally {
    if (restart) await restart;
    else await f.pg.startProcess();
  }
}

describe("rule: mint the key once per intent and reuse it for every retry", () => {
  it("every submit of an intent carries its one key: the second answer is the stored one (idempotency-replayed), one payout", async () => {
    const rf = client();
    const intent = await rf.payouts.intent(req("acct-once"));
    const a = await intent.submit();
    const b = await intent.submit();
    expect(a).toMatchObject({ replayed: false, idempotencyKey: intent.key, attempts: 1 });
    expect(b).toMatchObject({ replayed: true, idempotencyKey: intent.key });
    expect(b.payout.payoutId).toBe(a.payout.payoutId);
    expect(await countPayouts(f.paydb, "account_id = 'acct-once'")).toBe(1);
  });

  it("a retry after a 409 IDEMPOTENCY_CONFLICT uses the same key and ends with the first request's answer", async () => {
    const rf = client();
    const first = await rf.payouts.intent(req("acct-conflict"));
    const hold = await holdPayoutInserts(f.paydb);
    const running = first.submit();
    await claimed(f.paydb, first.key);
    // Another process resumes the same intent (same key) while the first is still running.
    const resumed = (await rf.payouts.intent(first.request as PayoutRequest, { key: first.key })).submit();
    await letTimePass(700, "the resumed submission meets the first one still running (IDEMPOTENCY_CONFLICT) and retries");
    await hold.release();
    const [a, b] = await Promise.all([running, resumed]);
    expect(b.payout.payoutId).toBe(a.payout.payoutId);
    expect(b.attempts).toBeGreaterThan(1);
    await eventually(async () => refusals(f.svc, "IDEMPOTENCY_CONFLICT").length >= 1, "the conflict's log line");
    expect(await countPayouts(f.paydb, "account_id = 'acct-conflict'")).toBe(1);
  });
});

describe("rule: a new key only when the request changes (a changed body is a new intent)", () => {
  it("an intent is bound to the request it was made with: changing the caller's object afterwards changes nothing", async () => {
    const rf = client();
    const body = req("acct-frozen", 500n);
    const intent = await rf.payouts.intent(body);
    body.amount.amountMinor = 999_999n;
    body.accountId = "acct-other";
    const r = await intent.submit();
    expect(r.payout.amount?.amountMinor).toBe(500n);
    expect(r.payout.accountId).toBe("acct-frozen");
  });

  it("two intents are two keys; without a key store passed, the default one binds an intent id to its key and its body", async () => {
    const rf = client(); // no keyStore: the library's default (in memory) must keep intent ids
    const a = await rf.payouts.intent(req("acct-new-intent"));
    const b = await rf.payouts.intent(req("acct-new-intent"));
    expect(a.key).not.toBe(b.key);
    // The same intent id three times (say, a checkout handler called three times for one order):
    // one key, one payout.
    const body = req("acct-default-store", 42n);
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await rf.payouts.create({ ...body, amount: { ...body.amount } }, { id: "order-9" }));
    expect(new Set(results.map((r) => r.idempotencyKey)).size).toBe(1);
    expect(new Set(results.map((r) => r.payout.payoutId)).size).toBe(1);
    expect(results.map((r) => r.replayed)).toEqual([false, true, true]);
    expect(await countPayouts(f.paydb, "account_id = 'acct-default-store'")).toBe(1);
    // The same id with a different body is refused before anything is sent.
    const before = refusals(f.svc).length;
    const changed = { ...body, amount: { amountMinor: 43n, currency: "EUR" } };
    await expect(rf.payouts.create(changed, { id: "order-9" })).rejects.toBeInstanceOf(IntentMismatchError);
    await expect(rf.payouts.intent(changed, { id: "order-9" })).rejects.toBeInstanceOf(IntentMismatchError);
    await quietFor(300, "a refusal in the server's log: nothing was sent");
    expect(refusals(f.svc).length).toBe(before);
    expect(await countPayouts(f.paydb, "account_id = 'acct-default-store'")).toBe(1);
    // Each client has its own default store: nothing leaks between two clients of one process.
    const other = client();
    const fresh = await other.payouts.intent(changed, { id: "order-9" });
    expect(fresh.key).not.toBe(results[0]!.idempotencyKey);
  });

  it("if a key does reach the server with another body, IDEMPOTENCY_KEY_REUSED is final, with its ErrorInfo metadata", async () => {
    const rf = client();
    const first = await rf.payouts.intent(req("acct-reused"));
    await first.submit();
    const other = await rf.payouts.intent(req("acct-reused"), { key: first.key });
    const err = await failure(other.submit());
    expect(err).toBeInstanceOf(RailfenceError);
    expect(err).toMatchObject({
      code: Code.InvalidArgument,
      reason: "IDEMPOTENCY_KEY_REUSED",
      domain: "railfence.dev",
      attempts: 1,
      transient: false,
      idempotencyKey: first.key,
    });
    expect(err!.metadata).toMatchObject({ field: "idempotency-key", http_status_in_ietf_draft: "422" });
    expect(await countPayouts(f.paydb, "account_id = 'acct-reused'")).toBe(1);
  });
});

describe("rule: retry only transient failures; every other refusal is final", () => {
  it("503 IDEMPOTENCY_UNAVAILABLE is retried, never sooner than its Retry-After, until paydb is back", async () => {
    const rf = client();
    const intent = await rf.payouts.intent(req("acct-503"));
    const seen = refusals(f.svc, "IDEMPOTENCY_UNAVAILABLE").length;
    const r = await withPaydbDown(3000, () => intent.submit());
    expect(r.attempts).toBeGreaterThanOrEqual(3);
    await eventually(async () => refusals(f.svc, "IDEMPOTENCY_UNAVAILABLE").length - seen >= r.attempts - 1, "every refusal's log line");
    const refused = refusals(f.svc, "IDEMPOTENCY_UNAVAILABLE").slice(seen);
    expect(refused.length).toBe(r.attempts - 1);
    // The server said "retry after 1 s" (RetryInfo): attempts are at least that far apart.
    for (let i = 1; i < refused.length; i++) expect(Date.parse(refused[i]!.time) - Date.parse(refused[i - 1]!.time)).toBeGreaterThanOrEqual(950);
    expect(await countPayouts(f.paydb, "account_id = 'acct-503'")).toBe(1);
  });

  it("reads are retried too (they change nothing)", async () => {
    const rf = client();
    const { payout } = await rf.payouts.create(req("acct-read"));
    const got = await withPaydbDown(1500, () => rf.payouts.get(payout.payoutId));
    expect(got.payoutId).toBe(payout.payoutId);
    expect(got.accountId).toBe("acct-read");
    await eventually(
      async () => f.svc.lines.some((l) => l.includes("GetPayout") && l.includes("PAYDB_UNAVAILABLE")),
      "a refused read attempt in the server's log",
    );
  });

  it.each([
    ["invalid_argument (a bad currency)", req("acct-final", 5n), Code.InvalidArgument, "CURRENCY_INVALID"],
    ["resource_exhausted (over the daily limit, with a retry hint)", req("acct-final-limit", 999_999n), Code.ResourceExhausted, "ACCOUNT_DAILY_LIMIT_EXCEEDED"],
  ])("%s: one attempt, reported with its reason", async (_, body, code, reason) => {
    const rf = client();
    if (reason === "CURRENCY_INVALID") body.amount.currency = "EURO";
    if (reason === "ACCOUNT_DAILY_LIMIT_EXCEEDED") await rf.payouts.create(req("acct-final-limit", 2n));
    const before = refusals(f.svc, reason).length;
    const err = await failure(rf.payouts.create(body));
    expect(err).toMatchObject({ code, reason, attempts: 1, transient: false });
    // The server saw exactly one attempt (its log line travels through a pipe: wait for it).
    await eventually(async () => refusals(f.svc, reason).length > before, "the refusal's log line");
    await quietFor(300, "a second attempt's log line: there is none");
    expect(refusals(f.svc, reason).length).toBe(before + 1);
    if (reason === "ACCOUNT_DAILY_LIMIT_EXCEEDED") expect(err!.retryAfterMs).toBeGreaterThan(0); // surfaced, not acted on
  });
});

describe("bounds on retrying", () => {
  it("the retry budget: a dead dependency gets a few retries, then one attempt per call", async () => {
    const rf = client({ retry: { baseDelayMs: 1, maxDelayMs: 1, maxAttempts: 50, budget: { maxTokens: 4, tokenRatio: 0.1 } } });
    const refusedReads = () =>
      f.svc.lines.filter((l) => l.includes('"event":"rpc_error"') && l.includes("GetPayout") && l.includes("PAYDB_UNAVAILABLE")).length;
    await withPaydbDown(undefined, async () => {
      const seen = refusedReads();
      // 4 tokens: retries only while more than 2 are left. Each refused attempt costs one.
      const first = await failure(rf.payouts.get("po_aaaaaaaaaaaaaaaaaaaa", { deadlineMs: 10_000 }));
      const second = await failure(rf.payouts.get("po_aaaaaaaaaaaaaaaaaaaa", { deadlineMs: 10_000 }));
      expect(first).toMatchObject({ code: Code.Unavailable, reason: "PAYDB_UNAVAILABLE", gaveUp: "budget", attempts: 2 });
      expect(second).toMatchObject({ code: Code.Unavailable, gaveUp: "budget", attempts: 1 });
      // The server saw three attempts in all, not the 50 maxAttempts would allow.
      await eventually(async () => refusedReads() - seen >= 3, "three refused reads in the server's log");
      await quietFor(300, "a fourth refused read: there is none");
      expect(refusedReads() - seen).toBe(3);
    });
  });

  it("the overall deadline: gives up in time, with the server's retry hint on the error", async () => {
    const rf = client();
    const intent = await rf.payouts.intent(req("acct-deadline"));
    // Timed around the submit alone: stopping and restarting PostgreSQL is not the client's time.
    let tookMs = 0;
    const err = await withPaydbDown(undefined, async () => {
      const started = Date.now();
      const e = await failure(intent.submit({ deadlineMs: 1500 }));
      tookMs = Date.now() - started;
      return e;
    });
    expect(tookMs).toBeLessThan(1500 + 1000);
    expect(err).toMatchObject({ code: Code.Unavailable, reason: "IDEMPOTENCY_UNAVAILABLE", gaveUp: "deadline", transient: true, idempotencyKey: intent.key });
    expect(err!.retryAfterMs).toBe(1000);
    // Giving up is not the end of the intent: submitting again later is safe (same key).
    const later = await intent.submit();
    expect(later.idempotencyKey).toBe(intent.key);
    expect(await countPayouts(f.paydb, "account_id = 'acct-deadline'")).toBe(1);
  });
});

describe("rule: answers are kept 24 hours (a key is never sent past the server's memory of it)", () => {
  it("a persisted intent whose key is older than the assumed retention is looked up, not sent; with no payout under it, IntentExpiredError", async () => {
    const store = new FileKeyStore(join(dir, "keys"));
    const body = req("acct-old");
    const { requestFingerprint } = await import("../../clients/typescript/src/index.js");
    // Same fingerprint as the request, so only the key's age decides.
    await store.putIfAbsent("order-old", { key: "k-old", fingerprint: requestFingerprint(body), createdAt: Date.now() - 25 * 3_600_000 });
    const rf = client({ keyStore: store });
    const intent = await rf.payouts.intent(body, { id: "order-old" });
    expect(intent.key).toBe("k-old");
    await expect(intent.submit()).rejects.toBeInstanceOf(IntentExpiredError);
    expect(await countPayouts(f.paydb, "account_id = 'acct-old'")).toBe(0);
    expect(await store.prune(24 * 3_600_000)).toBe(1);
  });
});

describe("transports", () => {
  it.each([
    ["Connect binary", { protocol: "connect" as const, json: false }],
    ["Connect JSON", { protocol: "connect" as const, json: true }],
  ])("%s: create, replay (idempotency-replayed), read", async (_, o) => {
    const rf = client(o);
    const intent = await rf.payouts.intent(req(`acct-${o.json ? "json" : "bin"}`));
    const a = await intent.submit();
    const b = await intent.submit();
    expect([a.replayed, b.replayed]).toEqual([false, true]);
    expect((await rf.payouts.get(a.payout.payoutId)).payoutId).toBe(a.payout.payoutId);
  });
});
