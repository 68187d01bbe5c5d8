/**
 * The Idempotency-Key contract of CreatePayout, row by row, against a real payouts process and
 * a real paydb. Every test counts rows in paydb: the contract is about what happens to money
 * records, not only about what the client is told.
 */
import { Code } from "@connectrpc/connect";
import { toBinary } from "@bufbuild/protobuf";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { RetryInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import { CreatePayoutResponseSchema, PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { usePayoutsService, countPayouts, create, eventually, keyRow, metric, newKey, requestHeld, sql, validRequest } from "./support.js";

const t = usePayoutsService();

const bytes = (r: unknown) => Buffer.from(toBinary(CreatePayoutResponseSchema, r as never)).toString("hex");

describe("CreatePayout with an Idempotency-Key", () => {
  it("runs the first request with a key: one PENDING payout, the answer pinned to the key", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-first", clientReference: "inv-1" });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const before = await metric(t.svc.ready!.metricsPort, "railfence_payouts_created_total");

    const r = await create(t.c.grpc, req, key, { traceparent });

    expect(r.error).toBeUndefined();
    expect(r.replayed).toBe(false);
    const p = r.response!.payout!;
    expect(p.payoutId).toMatch(/^po_[a-z2-7]{20}$/);
    expect(p).toMatchObject({ accountId: "acct-first", beneficiary: req.beneficiary, clientReference: "inv-1", state: PayoutState.PENDING, fence: 0n });
    expect(p.amount).toMatchObject({ amountMinor: req.amount!.amountMinor, currency: "EUR" });
    const rows = await sql(t.paydb, "SELECT * FROM payouts WHERE payout_id = $1", [p.payoutId]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ client_id: "local-default", state: "PENDING", traceparent, account_id: "acct-first" });
    const k = await keyRow(t.paydb, key);
    expect(k).toMatchObject({ state: "DONE", payout_id: p.payoutId, client_id: "local-default", locked_until: null });
    expect(await metric(t.svc.ready!.metricsPort, "railfence_payouts_created_total")).toBe(before + 1);
  });

  it("answers the same key and body after a success with the stored result verbatim, and runs nothing", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-replay" });
    const first = await create(t.c.grpc, req, key);
    expect(first.error).toBeUndefined();
    const created = await metric(t.svc.ready!.metricsPort, "railfence_payouts_created_total");
    const replays = await metric(t.svc.ready!.metricsPort, "railfence_payouts_idempotency_replays_total");
    // The executor may already have moved the payout on: a replay still shows the first answer.
    await sql(t.paydb, "UPDATE payouts SET state = 'PROCESSING', fence = 7 WHERE payout_id = $1", [first.response!.payout!.payoutId]);

    const again = await create(t.c.grpc, req, key);
    const third = await create(t.c.json, req, key);

    for (const r of [again, third]) {
      expect(r.error).toBeUndefined();
      expect(r.replayed).toBe(true);
      expect(bytes(r.response)).toBe(bytes(first.response));
    }
    expect(first.replayed).toBe(false);
    expect(await countPayouts(t.paydb, "account_id = 'acct-replay'")).toBe(1);
    expect(await metric(t.svc.ready!.metricsPort, "railfence_payouts_created_total")).toBe(created);
    expect(await metric(t.svc.ready!.metricsPort, "railfence_payouts_idempotency_replays_total")).toBe(replays + 2);
  });

  it("answers ABORTED IDEMPOTENCY_CONFLICT at once while the first request with the key is in progress", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-busy" });
    // Hold the first request inside its transaction: the payout insert waits on this lock.
    const blocker = new pg.Client({ connectionString: t.paydb });
    await blocker.connect();
    try {
      await blocker.query("BEGIN");
      await blocker.query("LOCK TABLE payouts IN EXCLUSIVE MODE");
      const conflicts = await metric(t.svc.ready!.metricsPort, "railfence_payouts_idempotency_conflicts_total");
      const first = create(t.c.grpc, req, key);
      await eventually(() => requestHeld(t.paydb, key), "the first request to be held in progress");

      const second = await create(t.c.grpc, req, key);
      const overJson = await create(t.c.json, req, key);

      for (const r of [second, overJson]) {
        expect(r.error?.code).toBe(Code.Aborted);
        expect(r.reason).toBe("IDEMPOTENCY_CONFLICT");
        // A retry hint: "wait briefly, retry with the same key".
        expect(r.error!.findDetails(RetryInfoSchema)).toHaveLength(1);
      }
      expect(overJson.headers.get("retry-after")).toBe("1");
      expect(await metric(t.svc.ready!.metricsPort, "railfence_payouts_idempotency_conflicts_total")).toBe(conflicts + 2);

      await blocker.query("COMMIT");
      const done = await first;
      expect(done.error).toBeUndefined();
      const replay = await create(t.c.grpc, req, key);
      expect(replay.replayed).toBe(true);
      expect(bytes(replay.response)).toBe(bytes(done.response));
      expect(await countPayouts(t.paydb, "account_id = 'acct-busy'")).toBe(1);
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
    }
  });

  it("does not pin errors: after a failed attempt the same key runs again", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-explode" });
    // A real failure after the key was claimed: t.paydb refuses this insert.
    await sql(
      t.paydb,
      `CREATE OR REPLACE FUNCTION test_refuse_payout() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN IF NEW.account_id = 'acct-explode' THEN RAISE EXCEPTION 'refused by test'; END IF; RETURN NEW; END $$`,
    );
    await sql(t.paydb, "CREATE TRIGGER test_refuse BEFORE INSERT ON payouts FOR EACH ROW EXECUTE FUNCTION test_refuse_payout()");
    let failed;
    try {
      failed = await create(t.c.grpc, req, key);
    } finally {
      await sql(t.paydb, "DROP TRIGGER test_refuse ON payouts");
    }
    expect(failed.error?.code).toBe(Code.Internal);
    expect(failed.error?.rawMessage).toBe("internal error"); // the database's message never leaks
    expect(await keyRow(t.paydb, key)).toBeUndefined();
    expect(await countPayouts(t.paydb, "account_id = 'acct-explode'")).toBe(0);

    const retried = await create(t.c.grpc, req, key);
    expect(retried.error).toBeUndefined();
    expect(retried.replayed).toBe(false);
    expect(await countPayouts(t.paydb, "account_id = 'acct-explode'")).toBe(1);
  });

  it("refuses the same key with a different body: INVALID_ARGUMENT IDEMPOTENCY_KEY_REUSED (422 in the IETF draft), nothing created", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-reuse" });
    const first = await create(t.c.grpc, req, key);
    expect(first.error).toBeUndefined();
    const reused = await metric(t.svc.ready!.metricsPort, "railfence_payouts_idempotency_key_reused_total");

    const variants = [
      { ...req, amount: { amountMinor: req.amount!.amountMinor + 1n, currency: "EUR" } },
      { ...req, amount: { amountMinor: req.amount!.amountMinor, currency: "USD" } },
      { ...req, beneficiary: "iban:FR7630006000011234567890189" },
      { ...req, accountId: "acct-reuse-2" },
      { ...req, clientReference: "something else" },
    ];
    for (const v of variants) {
      const r = await create(t.c.grpc, v, key);
      expect(r.error?.code).toBe(Code.InvalidArgument);
      expect(r.reason).toBe("IDEMPOTENCY_KEY_REUSED");
      expect(errorInfo(r.error)?.metadata).toMatchObject({ field: "idempotency-key", http_status_in_ietf_draft: "422" });
    }
    expect(await countPayouts(t.paydb, "account_id IN ('acct-reuse', 'acct-reuse-2')")).toBe(1);
    expect((await keyRow(t.paydb, key))?.payout_id).toBe(first.response!.payout!.payoutId);
    expect(await metric(t.svc.ready!.metricsPort, "railfence_payouts_idempotency_key_reused_total")).toBe(reused + variants.length);
  });

  it("requires the key: missing -> IDEMPOTENCY_KEY_MISSING; too long or not visible ASCII -> IDEMPOTENCY_KEY_INVALID; nothing written", async () => {
    const req = validRequest({ accountId: "acct-nokey" });
    const cases: Array<[string | undefined, string]> = [
      [undefined, "IDEMPOTENCY_KEY_MISSING"],
      ["x".repeat(256), "IDEMPOTENCY_KEY_INVALID"],
      ["has space", "IDEMPOTENCY_KEY_INVALID"],
      ["tab\there", "IDEMPOTENCY_KEY_INVALID"],
    ];
    for (const [key, reason] of cases) {
      const r = await create(t.c.grpc, req, key);
      expect(r.error?.code, `key ${JSON.stringify(key)}`).toBe(Code.InvalidArgument);
      expect(r.reason).toBe(reason);
      expect(errorInfo(r.error)?.metadata.field).toBe("idempotency-key");
    }
    expect(await countPayouts(t.paydb, "account_id = 'acct-nokey'")).toBe(0);
    expect(
      await sql(t.paydb, "SELECT 1 FROM idempotency_keys WHERE idempotency_key IN ('has space', 'tab\there') OR length(idempotency_key) > 255"),
    ).toHaveLength(0);

    // The boundary: 255 visible ASCII characters (including punctuation) is a valid key.
    const longest = `!~${"k".repeat(253)}`;
    const ok = await create(t.c.grpc, req, longest);
    expect(ok.error).toBeUndefined();
    expect(await countPayouts(t.paydb, "account_id = 'acct-nokey'")).toBe(1);
  });

  it("treats a key past retention as new, whether or not the purge job has removed it yet", async () => {
    const key = newKey();
    const req = validRequest({ accountId: "acct-retention" });
    const first = await create(t.c.grpc, req, key);
    expect(first.error).toBeUndefined();
    // Within retention it is pinned: a different body is refused.
    expect((await create(t.c.grpc, validRequest({ accountId: "acct-retention" }), key)).reason).toBe("IDEMPOTENCY_KEY_REUSED");
    // Retention over (the purge runs only every minute here, so the row is still present).
    await sql(t.paydb, "UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = $1", [key]);

    const other = validRequest({ accountId: "acct-retention" });
    const r = await create(t.c.grpc, other, key);
    expect(r.error).toBeUndefined();
    expect(r.replayed).toBe(false);
    expect(r.response!.payout!.payoutId).not.toBe(first.response!.payout!.payoutId);
    expect(await countPayouts(t.paydb, "account_id = 'acct-retention'")).toBe(2);
    expect(await keyRow(t.paydb, key)).toMatchObject({ state: "DONE", payout_id: r.response!.payout!.payoutId });
  });
});
