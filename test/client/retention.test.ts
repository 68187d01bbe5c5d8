/**
 * The server's retention of keys reaches the client library: against a real payouts process that
 * keeps keys 3 s (IDEMPOTENCY_RETENTION_MIN_OVERRIDE, tests only) and purges them at once, the
 * library learns each key's expiry from `idempotency-key-expires-at`, keeps it in the key store,
 * and never sends a key past it: it looks the payout up by the key (LookupPayout) instead. An
 * intent resubmitted after its key expired is one payout, not two.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PayoutService } from "../../clients/typescript/src/gen/railfence/payouts/v1/payouts_pb.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import {
  FileKeyStore,
  IDEMPOTENCY_KEY_HEADER,
  IntentExpiredError,
  RETENTION_HEADER,
  requestFingerprint,
  type PayoutRequest,
} from "../../clients/typescript/src/index.js";
import { eventually } from "../support/clients.js";
import { countPayouts, createPaydb, dropPaydb, sql, startPayouts } from "../payouts/support.js";
import { library } from "./support.js";

const RETENTION_MS = 3000;
let paydb: string;
let svc: ServiceProcess;
let dir: string;
const closers: Array<() => void> = [];

beforeAll(async () => {
  paydb = await createPaydb();
  svc = await startPayouts(paydb, {
    IDEMPOTENCY_RETENTION_MS: String(RETENTION_MS),
    IDEMPOTENCY_RETENTION_MIN_OVERRIDE: "true",
    IDEMPOTENCY_LOCK_MS: "1500",
    IDEMPOTENCY_PURGE_INTERVAL_MS: "200",
  });
  dir = mkdtempSync(join(tmpdir(), "railfence-retention-"));
});

afterAll(async () => {
  for (const c of closers.splice(0)) c();
  await svc?.stop(5000);
  if (paydb) await dropPaydb(paydb);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function client(o: Parameters<typeof library>[1] = {}) {
  const rf = library(svc.url, o);
  closers.push(() => rf.close());
  return rf;
}

const body = (accountId: string): PayoutRequest => ({
  accountId,
  amount: { amountMinor: 777n, currency: "EUR" },
  beneficiary: "ben-retention",
  clientReference: `ref-${accountId}`,
});
const createAttempts = () => svc.lines.filter((l) => l.includes("CreatePayout")).length;

/** Waits until the server has forgotten key (its row purged) and the stated expiry has passed. */
async function forgotten(key: string, expiresAt: Date): Promise<void> {
  await eventually(
    async () => Date.now() > expiresAt.getTime() && (await sql(paydb, "SELECT 1 FROM idempotency_keys WHERE idempotency_key = $1", [key])).length === 0,
    `the server to forget ${key}`,
    RETENTION_MS * 5,
  );
}

describe("a key never outlives the server's memory of it", () => {
  it("the same intent resubmitted after its key expired is looked up, not sent: one payout (also from another process's view of the key store)", async () => {
    const store = new FileKeyStore(join(dir, "keys"));
    const rf = client({ keyStore: store });
    const createdAt = Date.now();
    const first = await rf.payouts.create(body("acct-expired"), { id: "order-expired" });
    await forgotten(first.idempotencyKey, first.keyExpiresAt ?? new Date(createdAt + RETENTION_MS));

    // The same intent again, in this process ...
    const again = await rf.payouts.create(body("acct-expired"), { id: "order-expired" });
    // ... and in a new client resuming from the key store (a restarted process).
    const resumed = await client({ keyStore: new FileKeyStore(join(dir, "keys")) }).payouts.create(body("acct-expired"), { id: "order-expired" });
    expect(await countPayouts(paydb, "account_id = 'acct-expired'")).toBe(1);
    // The server's own clock said when: about RETENTION_MS after the create, stored with the key.
    expect(first.keyExpiresAt).toBeInstanceOf(Date);
    expect(first.keyExpiresAt!.getTime()).toBeGreaterThan(createdAt);
    expect(first.keyExpiresAt!.getTime()).toBeLessThan(createdAt + RETENTION_MS + 5000);
    expect((await store.get("order-expired"))?.expiresAt).toBe(first.keyExpiresAt!.getTime());
    for (const r of [again, resumed]) {
      expect(r).toMatchObject({ idempotencyKey: first.idempotencyKey, lookedUp: true, replayed: true });
      expect(r.payout.payoutId).toBe(first.payout.payoutId);
    }
  });

  it("a key the server never answered, past the assumed retention, is not sent: no payout under it, so IntentExpiredError and nothing created", async () => {
    const store = new FileKeyStore(join(dir, "old-keys"));
    const request = body("acct-never-answered");
    // Minted 25 h ago (the process died before any answer, so no expiry is known).
    await store.putIfAbsent("order-old", { key: "k-never-answered", fingerprint: requestFingerprint(request), createdAt: Date.now() - 25 * 3_600_000 });
    const rf = client({ keyStore: store });
    const creates = createAttempts();
    const err = await rf.payouts.create(request, { id: "order-old" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(IntentExpiredError);
    expect(err).toMatchObject({ intentId: "order-old", idempotencyKey: "k-never-answered" });
    await eventually(async () => svc.lines.some((l) => l.includes("LookupPayout")), "the lookup in the server's log");
    expect(createAttempts()).toBe(creates);
    expect(await countPayouts(paydb, "account_id = 'acct-never-answered'")).toBe(0);
  });

  it("a key never answered, older than the retention the server announced but younger than the client's default, is not sent (decision 051)", async () => {
    const request = body("acct-announced");
    // Minted 5 s ago, then the process died before any answer: its own expiry is unknown, and the
    // client's default (23 h) would still send it, while this server forgot such a key after 3 s.
    const mint = async (dirName: string) => {
      const store = new FileKeyStore(join(dir, dirName));
      await store.putIfAbsent("order-young", { key: `k-young-${dirName}`, fingerprint: requestFingerprint(request), createdAt: Date.now() - 5000 });
      return store;
    };
    const rf = client({ keyStore: await mint("announced") });
    // Any answer announces the retention: an unrelated payout by the same client.
    const other = await rf.payouts.create(body("acct-announcer"));
    expect(other.payout.payoutId).not.toBe("");
    const creates = createAttempts();
    const err = await rf.payouts.create(request, { id: "order-young" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(IntentExpiredError);
    expect(err).toMatchObject({ intentId: "order-young", idempotencyKey: "k-young-announced" });
    expect(createAttempts()).toBe(creates);
    expect(await countPayouts(paydb, "account_id = 'acct-announced'")).toBe(0);

    // Control: a client that has heard no announcement sends the same young key (the check can fail).
    const unaware = client({ keyStore: await mint("unaware") });
    const sent = await unaware.payouts.create(request, { id: "order-young" });
    expect(sent.lookedUp).toBeFalsy();
    expect(await countPayouts(paydb, "account_id = 'acct-announced'")).toBe(1);
  });

  it("every CreatePayout answer that stored a key announces the server's retention in whole seconds", async () => {
    const rf = client();
    let announced: string | null = null;
    const intent = await rf.payouts.intent(body("acct-header"));
    const transport = rf.transport(svc.url);
    await createClient(PayoutService, transport).createPayout(
      { ...intent.request, amount: { ...intent.request.amount } },
      { headers: { [IDEMPOTENCY_KEY_HEADER]: intent.key }, onHeader: (h) => (announced = h.get(RETENTION_HEADER)) },
    );
    expect(announced).toBe(String(RETENTION_MS / 1000));
  });
});
