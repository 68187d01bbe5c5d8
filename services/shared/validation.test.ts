import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DomainError } from "./errors.js";
import { checkId, checkMoney, checkToken, MAX_TOKEN } from "./validation.js";

const reasonOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as DomainError).reason;
  }
  return "OK";
};

describe("validation", () => {
  it("accepts exactly the documented id alphabet", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 0, maxLength: 80 }), (s) => {
        const ok = /^[A-Za-z0-9._:-]{1,64}$/.test(s);
        expect(reasonOf(() => checkId("id", s)) === "OK").toBe(ok);
      }),
      { numRuns: 2000 },
    );
  });

  it("tokens are 1 .. 2^63-1", () => {
    expect(reasonOf(() => checkToken("t", 0n))).toBe("TOKEN_INVALID");
    expect(reasonOf(() => checkToken("t", 1n))).toBe("OK");
    expect(reasonOf(() => checkToken("t", MAX_TOKEN))).toBe("OK");
    expect(reasonOf(() => checkToken("t", MAX_TOKEN + 1n))).toBe("TOKEN_INVALID");
    expect(reasonOf(() => checkToken("t", 2n ** 64n - 1n))).toBe("TOKEN_INVALID");
  });

  it("money is positive integer minor units in an ISO-4217 currency", () => {
    expect(reasonOf(() => checkMoney("amount", { amountMinor: 1n, currency: "JPY" }))).toBe("OK");
    expect(reasonOf(() => checkMoney("amount", { amountMinor: 0n, currency: "EUR" }))).toBe("AMOUNT_INVALID");
    expect(reasonOf(() => checkMoney("amount", { amountMinor: 1n, currency: "EURO" }))).toBe("CURRENCY_INVALID");
    expect(reasonOf(() => checkMoney("amount", undefined))).toBe("FIELD_REQUIRED");
  });
});
