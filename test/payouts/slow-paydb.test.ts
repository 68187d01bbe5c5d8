/**
 * A slow paydb is unavailable, not internal: a CreatePayout whose statement waits past paydb's
 * statement_timeout (here: on a key row another session is inserting and has not committed)
 * answers UNAVAILABLE PAYDB_BUSY with a retry hint, creates nothing, and the same key runs once
 * the other session is gone. Reads held up the same way answer the same.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorReason } from "../../services/shared/domain/errors.js";
import { RetryInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { clients, countPayouts, create, createPaydb, dropPaydb, keyRow, newKey, startPayouts, validRequest } from "./support.js";

let paydb: string;
let svc: ServiceProcess;
let c: ReturnType<typeof clients>;
let holder: pg.Client | undefined;

beforeAll(async () => {
  paydb = await createPaydb();
  svc = await startPayouts(paydb, { PAYDB_STATEMENT_TIMEOUT_MS: "1000" });
  c = clients(svc.url);
});

afterAll(async () => {
  await holder?.end().catch(() => {});
  c?.close();
  await svc?.stop(5000);
  if (paydb) await dropPaydb(paydb);
});

describe("paydb slower than its statement timeout", () => {
  it("answers UNAVAILABLE PAYDB_BUSY with a retry hint, creates nothing, and the same key succeeds after the lock is released", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-slow" });
    // Another session is inserting this very key and holds its row lock (as a stuck transaction would).
    holder = new pg.Client({ connectionString: paydb });
    await holder.connect();
    await holder.query("BEGIN");
    await holder.query(
      `INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, state, claim_id, locked_until, expires_at)
       VALUES ('local-default', $1, '\\x00', 'IN_PROGRESS', 'held', now() + interval '1 hour', now() + interval '1 day')`,
      [key],
    );

    for (const client of [c.grpc, c.json]) {
      const refused = await create(client, req, key);
      expect(refused.error?.code, refused.error?.rawMessage).toBe(Code.Unavailable);
      expect(refused.reason).toBe("PAYDB_BUSY");
      const delay = refused.error!.findDetails(RetryInfoSchema)[0]?.retryDelay;
      expect(delay && Number(delay.seconds) * 1000 + delay.nanos / 1e6).toBeGreaterThan(0);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(refused.error!.rawMessage).not.toMatch(/statement|timeout|canceling/i);
    }
    expect(await countPayouts(paydb, "account_id = 'acct-slow'")).toBe(0);

    await holder.query("ROLLBACK");
    const after = await create(c.grpc, req, key);
    expect(after.error).toBeUndefined();
    expect(after.replayed).toBe(false);
    expect(await countPayouts(paydb, "account_id = 'acct-slow'")).toBe(1);
    expect(await keyRow(paydb, key)).toMatchObject({ state: "DONE" });
  });

  it("a read held past the statement timeout (a table lock) is UNAVAILABLE PAYDB_BUSY, and answers once the lock is gone", async () => {
    const made = await create(c.grpc, validRequest({ accountId: "acct-slow-read" }), newKey());
    const payoutId = made.response!.payout!.payoutId;
    const reader = new pg.Client({ connectionString: paydb });
    await reader.connect();
    try {
      await reader.query("BEGIN");
      await reader.query("LOCK TABLE payouts IN ACCESS EXCLUSIVE MODE");
      for (const read of [() => c.grpc.getPayout({ payoutId }), () => c.json.listPayouts({ accountId: "acct-slow-read" })]) {
        const err = await read().then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        expect(err?.code, err?.rawMessage).toBe(Code.Unavailable);
        expect(errorReason(err)).toBe("PAYDB_BUSY");
      }
      await reader.query("COMMIT");
    } finally {
      await reader.end();
    }
    expect((await c.grpc.getPayout({ payoutId })).payout!.payoutId).toBe(payoutId);
  });
});
