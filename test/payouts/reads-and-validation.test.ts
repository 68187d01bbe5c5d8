/**
 * GetPayout / ListPayouts (keyset paging newest first, filters, opaque tokens) and bad input on
 * every field: each is refused with INVALID_ARGUMENT naming the field, and changes nothing.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { usePayoutsService, countPayouts, create, newKey, sql, validRequest, type CreateInit } from "./support.js";

const t = usePayoutsService();

async function rejection(p: Promise<unknown>): Promise<{ code: Code; reason: string; field: string | undefined }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  expect(err, "expected a rejection").toBeDefined();
  const info = errorInfo(err);
  return { code: err!.code, reason: info?.reason ?? "", field: info?.metadata.field };
}

describe("CreatePayout input validation", () => {
  const base = (): CreateInit => validRequest({ accountId: "acct-valid" });
  const cases: Array<[string, CreateInit, string, string]> = [
    ["empty account_id", { ...base(), accountId: "" }, "account_id", "FIELD_REQUIRED"],
    ["account_id with a space", { ...base(), accountId: "acct 1" }, "account_id", "FIELD_INVALID"],
    ["account_id with a Cyrillic look-alike", { ...base(), accountId: "\u0430cct-1" }, "account_id", "FIELD_INVALID"],
    ["account_id of 65 characters", { ...base(), accountId: "a".repeat(65) }, "account_id", "FIELD_INVALID"],
    ["no amount", { ...base(), amount: undefined }, "amount", "FIELD_REQUIRED"],
    ["zero amount", { ...base(), amount: { amountMinor: 0n, currency: "EUR" } }, "amount.amount_minor", "AMOUNT_INVALID"],
    ["negative amount", { ...base(), amount: { amountMinor: -5n, currency: "EUR" } }, "amount.amount_minor", "AMOUNT_INVALID"],
    ["amount above 10^15", { ...base(), amount: { amountMinor: 10n ** 15n + 1n, currency: "EUR" } }, "amount.amount_minor", "AMOUNT_INVALID"],
    ["lower-case currency", { ...base(), amount: { amountMinor: 5n, currency: "eur" } }, "amount.currency", "CURRENCY_INVALID"],
    ["unknown currency", { ...base(), amount: { amountMinor: 5n, currency: "XYZ" } }, "amount.currency", "CURRENCY_INVALID"],
    ["empty beneficiary", { ...base(), beneficiary: "" }, "beneficiary", "FIELD_REQUIRED"],
    ["beneficiary with a space", { ...base(), beneficiary: "DE89 3704" }, "beneficiary", "FIELD_INVALID"],
    ["beneficiary of 129 characters", { ...base(), beneficiary: "b".repeat(129) }, "beneficiary", "FIELD_INVALID"],
    ["client_reference of 129 characters", { ...base(), clientReference: "r".repeat(129) }, "client_reference", "FIELD_TOO_LONG"],
    ["client_reference with a control character", { ...base(), clientReference: "line\nbreak" }, "client_reference", "FIELD_INVALID"],
  ];
  for (const [what, req, field, reason] of cases) {
    it(`refuses ${what}: INVALID_ARGUMENT ${reason} on ${field}, nothing written`, async () => {
      const key = newKey();
      const r = await create(t.c.grpc, req, key);
      expect(r.error?.code).toBe(Code.InvalidArgument);
      expect(r.reason).toBe(reason);
      expect(errorInfo(r.error)?.metadata.field).toBe(field);
      expect(await sql(t.paydb, "SELECT 1 FROM idempotency_keys WHERE idempotency_key = $1", [key])).toHaveLength(0);
      expect(await countPayouts(t.paydb, "account_id = 'acct-valid'")).toBe(0);
      // The key was not consumed: the corrected request runs under it.
      const fixed = await create(t.c.grpc, validRequest({ accountId: "acct-fixed" }), key);
      expect(fixed.error).toBeUndefined();
    });
  }
});

describe("GetPayout and ListPayouts", () => {
  it("GetPayout returns the payout as created; an unknown id is NOT_FOUND PAYOUT_NOT_FOUND; a bad id is INVALID_ARGUMENT", async () => {
    const made = await create(t.c.grpc, validRequest({ accountId: "acct-get", clientReference: "ref-get" }), newKey());
    const got = await t.c.grpc.getPayout({ payoutId: made.response!.payout!.payoutId });
    expect(got.payout).toEqual(made.response!.payout);
    expect(await rejection(t.c.grpc.getPayout({ payoutId: "po_doesnotexist" }))).toMatchObject({ code: Code.NotFound, reason: "PAYOUT_NOT_FOUND" });
    expect(await rejection(t.c.grpc.getPayout({ payoutId: "" }))).toMatchObject({ code: Code.InvalidArgument, reason: "FIELD_REQUIRED", field: "payout_id" });
    expect(await rejection(t.c.grpc.getPayout({ payoutId: "po 1" }))).toMatchObject({
      code: Code.InvalidArgument,
      reason: "FIELD_INVALID",
      field: "payout_id",
    });
  });

  it("pages newest first through every payout of an account, without gaps or repeats, and filters by state", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await create(t.c.grpc, validRequest({ accountId: "acct-list" }), newKey())).response!.payout!.payoutId);
    await create(t.c.grpc, validRequest({ accountId: "acct-list-other" }), newKey());
    // Same created_at for two rows: the payout_id tiebreak keeps paging exact.
    await sql(t.paydb, "UPDATE payouts SET created_at = (SELECT created_at FROM payouts WHERE payout_id = $1) WHERE payout_id = $2", [ids[3], ids[4]]);

    const seen: string[] = [];
    let token = "";
    let pages = 0;
    do {
      const page = await t.c.json.listPayouts({ accountId: "acct-list", pageSize: 3, pageToken: token });
      expect(page.payouts.length).toBeLessThanOrEqual(3);
      seen.push(...page.payouts.map((p) => p.payoutId));
      token = page.nextPageToken;
      pages++;
    } while (token && pages < 10);
    expect(new Set(seen).size).toBe(7);
    expect([...seen].sort()).toEqual([...ids].sort());
    const expectedOrder = await sql<{ payout_id: string }>(
      t.paydb,
      "SELECT payout_id FROM payouts WHERE account_id = 'acct-list' ORDER BY created_at DESC, payout_id DESC",
    );
    expect(seen).toEqual(expectedOrder.map((r) => r.payout_id));

    await sql(t.paydb, "UPDATE payouts SET state = 'PAID', rail_reference = 'rr-1' WHERE payout_id = $1", [ids[2]]);
    const paid = await t.c.grpc.listPayouts({ accountId: "acct-list", state: PayoutState.PAID });
    expect(paid.payouts.map((p) => p.payoutId)).toEqual([ids[2]]);
    expect(paid.payouts[0]).toMatchObject({ state: PayoutState.PAID, railReference: "rr-1" });
    const all = await t.c.grpc.listPayouts({ pageSize: 500 });
    expect(all.payouts.some((p) => p.accountId === "acct-list-other")).toBe(true);
  });

  it("refuses bad list input: page token (forged, garbage, or issued for another filter), page size, state, account filter", async () => {
    for (let i = 0; i < 3; i++) await create(t.c.grpc, validRequest({ accountId: "acct-tok" }), newKey());
    const first = await t.c.grpc.listPayouts({ accountId: "acct-tok", pageSize: 1 });
    expect(first.nextPageToken).not.toBe("");
    const forged = Buffer.from(JSON.stringify({ v: 1, c: "not-a-time", p: "x", a: "acct-tok", s: 0 })).toString("base64url");
    for (const pageToken of ["garbage!", "eyJ2IjoxfQ", forged]) {
      expect(await rejection(t.c.grpc.listPayouts({ accountId: "acct-tok", pageToken }))).toMatchObject({
        code: Code.InvalidArgument,
        reason: "PAGE_TOKEN_INVALID",
        field: "page_token",
      });
    }
    expect(await rejection(t.c.grpc.listPayouts({ accountId: "acct-other", pageToken: first.nextPageToken }))).toMatchObject({ reason: "PAGE_TOKEN_INVALID" });
    expect(await rejection(t.c.grpc.listPayouts({ pageSize: 501 }))).toMatchObject({
      code: Code.InvalidArgument,
      reason: "PAGE_SIZE_INVALID",
      field: "page_size",
    });
    expect(await rejection(t.c.grpc.listPayouts({ state: 42 as PayoutState }))).toMatchObject({ code: Code.InvalidArgument, field: "state" });
    expect(await rejection(t.c.grpc.listPayouts({ accountId: "bad id" }))).toMatchObject({ code: Code.InvalidArgument, field: "account_id" });
    // The genuine token still works.
    const second = await t.c.grpc.listPayouts({ accountId: "acct-tok", pageSize: 1, pageToken: first.nextPageToken });
    expect(second.payouts).toHaveLength(1);
    expect(second.payouts[0]!.payoutId).not.toBe(first.payouts[0]!.payoutId);
  });
});
