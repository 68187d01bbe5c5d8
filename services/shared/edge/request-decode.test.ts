import { Code } from "@connectrpc/connect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DomainError } from "../domain/errors.js";
import { AcquireRequestSchema } from "../gen/railfence/lock/v1/lock_pb.js";
import { CreatePayoutRequestSchema } from "../gen/railfence/payouts/v1/payouts_pb.js";
import { decodeBinaryRequest, decodeJsonRequest } from "./request-decode.js";

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    const d = e as DomainError;
    return { code: d.code, reason: d.reason, ...d.metadata, message: d.message };
  }
  return undefined;
};
const utf8 = (s: string) => new TextEncoder().encode(s);

describe("decodeJsonRequest", () => {
  it("refuses bodies that are not UTF-8 instead of reading U+FFFD into them", () => {
    const body = Uint8Array.from([...utf8('{"key":"a'), 0xff, ...utf8('"}')]);
    expect(refusal(() => decodeJsonRequest(AcquireRequestSchema, body))).toMatchObject({
      code: Code.InvalidArgument,
      reason: "MALFORMED_REQUEST",
      problem: "invalid_utf8",
    });
  });

  it("refuses lone surrogate escapes, broken JSON and wrong types, naming the field when one is at fault", () => {
    expect(refusal(() => decodeJsonRequest(AcquireRequestSchema, utf8('{"key":"a\\ud800"}')))).toMatchObject({
      reason: "MALFORMED_REQUEST",
      problem: "invalid_utf8",
    });
    expect(refusal(() => decodeJsonRequest(AcquireRequestSchema, utf8('{"key":')))).toMatchObject({ reason: "MALFORMED_REQUEST", problem: "invalid_json" });
    expect(refusal(() => decodeJsonRequest(AcquireRequestSchema, utf8('{"ttlMs":"soon"}')))).toMatchObject({
      reason: "MALFORMED_REQUEST",
      problem: "invalid_value",
      field: "ttl_ms",
    });
    expect(refusal(() => decodeJsonRequest(CreatePayoutRequestSchema, utf8('{"amount":{"amountMinor":"1e99"}}')))).toMatchObject({
      reason: "MALFORMED_REQUEST",
      problem: "invalid_value",
      field: "amount.amount_minor",
    });
  });

  it("accepts well-formed surrogate pairs", () => {
    expect(decodeJsonRequest(AcquireRequestSchema, utf8('{"owner":"\\ud83d\\ude00"}')).owner).toBe("\u{1f600}");
  });

  it("refuses a key that names no field, at any depth, naming it (decision 050)", () => {
    expect(refusal(() => decodeJsonRequest(CreatePayoutRequestSchema, utf8('{"accountId":"a","clientRefrence":"order-1"}')))).toMatchObject({
      code: Code.InvalidArgument,
      reason: "UNKNOWN_FIELD",
      field: "clientRefrence",
    });
    expect(refusal(() => decodeJsonRequest(CreatePayoutRequestSchema, utf8('{"amount":{"amountMinr":"5","currency":"EUR"}}')))).toMatchObject({
      reason: "UNKNOWN_FIELD",
      field: "amount.amountMinr",
    });
    // A long key is echoed shortened: the refusal stays small.
    expect(refusal(() => decodeJsonRequest(AcquireRequestSchema, utf8(`{"${"k".repeat(500)}":1}`)))).toMatchObject({ field: `${"k".repeat(64)}...` });
    // Both spellings of a real field are fields: the proto name and the JSON name.
    expect(decodeJsonRequest(CreatePayoutRequestSchema, utf8('{"client_reference":"r1"}')).clientReference).toBe("r1");
    expect(decodeJsonRequest(CreatePayoutRequestSchema, utf8('{"clientReference":"r2"}')).clientReference).toBe("r2");
  });

  it("never lets decoder text through: any bytes decode or refuse with our own words", () => {
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 60 }), fc.json().map(utf8)), (bytes) => {
        for (const decode of [decodeJsonRequest, decodeBinaryRequest]) {
          const r = refusal(() => decode(AcquireRequestSchema, bytes));
          if (r?.reason === "UNKNOWN_FIELD") {
            expect(r.message).toMatch(/^unknown field ".*" in railfence\.lock\.v1\.AcquireRequest$/s);
          } else if (r) {
            expect(r.reason).toBe("MALFORMED_REQUEST");
            expect(r.message).toMatch(/^malformed request: [a-z0-9 ]+( \(field [a-z_.]+\))?$/);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });
});
