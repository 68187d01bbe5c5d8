import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { DomainError } from "./errors.js";
import { checkId, checkMoney, checkText, checkToken, MAX_TOKEN } from "./validation.js";

const reasonOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as DomainError).reason;
  }
  return "OK";
};

const metadataOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as DomainError).metadata;
  }
  return undefined;
};

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String.fromCodePoint(from + i));

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

  describe("free text (checkText)", () => {
    it("refuses every character the API docs name, naming the field and the code point", () => {
      const named = [
        ...range(0x00, 0x1f),
        "\u007f", // C0, DEL
        ...range(0x80, 0x9f), // C1
        "\u2028",
        "\u2029",
        ...range(0x202a, 0x202e),
        ...range(0x2066, 0x2069),
        "\u061c",
        "\u200e",
        "\u200f", // bidi
        ...range(0x200b, 0x200d),
        "\u2060",
        "\ufeff",
        "\u00ad",
        "\u3164",
        "\ufe0f",
        "\u{e0041}", // invisible
        "\ud800",
        "\udfff",
        "\ufffe",
        "\ufdd0",
      ];
      for (const c of named) {
        const text = `inv${c}1`;
        expect(
          reasonOf(() => checkText("client_reference", text, 0, 128)),
          JSON.stringify(text),
        ).toBe("FIELD_INVALID");
        const cp = c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
        expect(metadataOf(() => checkText("client_reference", text, 0, 128))).toEqual({ field: "client_reference", code_point: `U+${cp}` });
      }
    });

    it("accepts visible text in any script, accents, combining marks and emoji without joiners", () => {
      for (const text of ["invoice 42", "Zahlung für Müller", "支払い", "دفعة", "भुगतान", "e\u0301", "\u{1f600}", "a\u00a0b", "-- ok / fine: 100%"]) {
        expect(
          reasonOf(() => checkText("note", text, 0, 1000)),
          JSON.stringify(text),
        ).toBe("OK");
      }
    });

    it("refuses exactly the documented classes (control, format, surrogate, separators, default-ignorable, noncharacters)", () => {
      const documented = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\p{Noncharacter_Code_Point}]/u;
      fc.assert(
        fc.property(fc.string({ unit: "binary", maxLength: 20 }), (s) => {
          expect(reasonOf(() => checkText("note", s, 0, 1000)) === "OK", JSON.stringify(s)).toBe(!documented.test(s));
        }),
        { numRuns: 5000 },
      );
    });
  });
});
