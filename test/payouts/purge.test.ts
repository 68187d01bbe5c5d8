/**
 * Retention and the purge job, with a 1 s retention and a 200 ms purge interval: expired keys
 * disappear (payouts stay), unexpired ones stay, and an expired key is a new key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, eventually, keyRow, metric, newKey, sql, startPayouts, validRequest } from "./support.js";

let paydb: string;
let svc: ServiceProcess;
let c: ReturnType<typeof clients>;

beforeAll(async () => {
  paydb = await createPaydb();
  svc = await startPayouts(paydb, {
    IDEMPOTENCY_RETENTION_MS: "1000",
    IDEMPOTENCY_LOCK_MS: "500",
    IDEMPOTENCY_RETENTION_MIN_OVERRIDE: "true",
    IDEMPOTENCY_PURGE_INTERVAL_MS: "200",
  });
  c = clients(svc.url);
});

afterAll(async () => {
  c?.close();
  await svc?.stop(5000);
  if (paydb) await dropPaydb(paydb);
});

describe("idempotency key retention", () => {
  it("purges keys past retention, keeps the payouts and unexpired keys; the purged key is then a new key", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-purge" });
    const first = await create(c.grpc, req, key);
    expect(first.error).toBeUndefined();
    // A key still inside retention (as if created with a 24 h retention) must survive purges.
    const keeper = newKey();
    await sql(
      paydb,
      `INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, state, response, payout_id, expires_at)
       VALUES ('local-default', $1, '\\x00', 'DONE', '\\x00', 'po_keeper', now() + interval '1 hour')`,
      [keeper],
    );
    // And a crashed attempt's marker past retention whose lease still runs: not purged yet.
    const running = newKey();
    await sql(
      paydb,
      `INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, state, claim_id, locked_until, expires_at)
       VALUES ('local-default', $1, '\\x00', 'IN_PROGRESS', 'c1', now() + interval '1 hour', now() - interval '1 second')`,
      [running],
    );

    await eventually(async () => (await keyRow(paydb, key)) === undefined, "the purge of the expired key");
    expect(await metric(svc.ready!.metricsPort, "railfence_payouts_idempotency_purged_total")).toBeGreaterThanOrEqual(1);
    expect(await keyRow(paydb, keeper)).toBeDefined();
    expect(await keyRow(paydb, running)).toBeDefined();
    expect(await countPayouts(paydb, "payout_id = $1", [first.response!.payout!.payoutId])).toBe(1);

    // After retention the key is new: even a different body runs.
    const next = await create(c.grpc, validRequest({ accountId: "acct-purge" }), key);
    expect(next.error).toBeUndefined();
    expect(next.replayed).toBe(false);
    expect(await countPayouts(paydb, "account_id = 'acct-purge'")).toBe(2);
  });
});
