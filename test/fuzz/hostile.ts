/**
 * Arbitraries for hostile input, and an independent model of what the API contract says about
 * each value (SPEC C3 §3.5 step 0 and the shared limits). The model is written from the spec,
 * not imported from the implementation, so a validator that drifts from the spec is caught.
 */
import fc from "fast-check";
import { ISO_4217 } from "../../services/shared/domain/iso4217.js";

/** Look-alikes, invisible and control characters, injection and traversal strings. */
export const CONFUSABLES: readonly string[] = [
  "\u0430cc-1", // Cyrillic a
  "ac\u0441-1", // Cyrillic es
  "\uff41cc-1", // fullwidth a
  "acc\u20101", // unicode hyphen
  "acc\u200b1", // zero-width space
  "acc\u00ad1", // soft hyphen
  "acc\u202e1", // right-to-left override
  "acc-\u0661", // Arabic-Indic digit one
  "\u212acc", // Kelvin sign
  "\u0130d", // dotted capital I
  "acc\u00001", // NUL
  "acc\n1",
  "acc 1",
  "acc\t1",
  "acc'; DROP TABLE rail_submissions;--",
  "../../etc/passwd",
  "%00",
  "${jndi:ldap://x/a}",
  "acc\u{1f600}",
  "\ufeffacc",
  "\u00e9",
  "inv\u009b1", // C1 CSI: a terminal escape without ESC
  "inv\u00851", // C1 NEL
  "ref\u2028x", // line separator
  "ref\u2029x", // paragraph separator
  "ref\u2066x\u2069", // bidi isolate
  "ref\u202dx", // left-to-right override
  "ref\u061cx", // Arabic letter mark
  "ref\u200dx", // zero-width joiner
  "ref\u2060x", // word joiner
  "ref\u3164x", // Hangul filler (invisible, a letter)
  "ref\ufe0fx", // variation selector
  "ref\u{e0041}x", // tag character
  "ref\ufffex", // noncharacter
];

/**
 * Characters free text must refuse (the API docs' rule): control (Cc: C0, DEL, C1), format (Cf),
 * surrogate (Cs), line and paragraph separators (Zl, Zp), default-ignorable and noncharacter
 * code points. Written from the documented rule, not taken from the implementation.
 */
export const FORBIDDEN_IN_TEXT = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\p{Noncharacter_Code_Point}]/u;

/** Samples of each forbidden family the issue names, plus the invisible ones decision 009 adds. */
export const FORBIDDEN_SAMPLES: readonly string[] = [
  "\u0000",
  "\u001b",
  "\u007f", // C0, DEL
  "\u0080",
  "\u0085",
  "\u009b",
  "\u009f", // C1
  "\u2028",
  "\u2029", // separators
  "\u202a",
  "\u202b",
  "\u202c",
  "\u202d",
  "\u202e",
  "\u2066",
  "\u2067",
  "\u2068",
  "\u2069",
  "\u061c",
  "\u200e",
  "\u200f", // bidi
  "\u200b",
  "\u200c",
  "\u200d",
  "\u2060",
  "\ufeff",
  "\u00ad",
  "\u3164",
  "\ufe0f",
  "\u{e0001}",
  "\u{e007f}", // invisible
  "\ufffe",
  "\uffff",
  "\ufdd0", // noncharacters
];

/** Text with one forbidden character at a random place: the family that found C1 and bidi in client references. */
export function textWithForbidden(maxLength = 60): fc.Arbitrary<string> {
  return fc.tuple(fc.stringMatching(/^[ -~]{0,60}$/), fc.constantFrom(...FORBIDDEN_SAMPLES), fc.nat()).map(([text, bad, at]) => {
    const base = text.slice(0, Math.max(0, maxLength - 2));
    const i = at % (base.length + 1);
    return base.slice(0, i) + bad + base.slice(i);
  });
}

/**
 * A lone surrogate has no UTF-8 form: a protobuf client replaces it with U+FFFD before it leaves
 * (so the server never sees it), a JSON client sends it escaped. Strings for client-level
 * properties are made well-formed; the raw-wire suite sends lone surrogates itself.
 */
const wellFormed = (s: string) => s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

/** Strings a careful API refuses (or must at least survive): confusables, arbitrary code points, controls. */
export function hostileString(maxHuge = 2500): fc.Arbitrary<string> {
  return hostileStringRaw(maxHuge).map(wellFormed);
}

function hostileStringRaw(maxHuge: number): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...CONFUSABLES) },
    { weight: 2, arbitrary: textWithForbidden() },
    { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 80 }) },
    { weight: 2, arbitrary: fc.string({ unit: "binary-ascii", maxLength: 80 }) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }) },
    { weight: 1, arbitrary: fc.integer({ min: 65, max: maxHuge }).map((n) => "a".repeat(n)) },
    { weight: 1, arbitrary: fc.constant("") },
  );
}

export const ID_RE = /^[A-Za-z0-9._:-]{1,64}$/;
export const BENEFICIARY_RE = /^[A-Za-z0-9._:/-]{1,128}$/;
export const validId = fc.stringMatching(ID_RE);
export const validBeneficiary = fc.stringMatching(BENEFICIARY_RE);

export const MAX_TOKEN = (1n << 63n) - 1n;
export const MAX_U64 = (1n << 64n) - 1n;
export const MAX_AMOUNT = 10n ** 15n;
export const I64_MIN = -(1n << 63n);
export const I64_MAX = (1n << 63n) - 1n;

/** ids: mostly hostile, sometimes valid. */
export const anyId = fc.oneof({ weight: 1, arbitrary: validId }, { weight: 3, arbitrary: hostileString() });
export const anyBeneficiary = fc.oneof({ weight: 1, arbitrary: validBeneficiary }, { weight: 3, arbitrary: hostileString() });

/** uint64 tokens across every boundary the contract cares about (> 2^64 is a wire-level case). */
export const anyToken = fc.oneof(
  fc.constant(0n),
  fc.bigInt({ min: 1n, max: MAX_TOKEN }),
  fc.constantFrom(1n, MAX_TOKEN, MAX_TOKEN + 1n, MAX_U64),
  fc.bigInt({ min: MAX_TOKEN + 1n, max: MAX_U64 }),
);

export const anyCurrency = fc.oneof(
  fc.constantFrom("EUR", "USD", "JPY", "GBP"),
  fc.constantFrom("eur", "XYZ", "\u0415UR", "EU", "EURO", "", " EUR", "EUR\u0000", "E\u200bUR"),
  fc.string({ maxLength: 5 }),
);

/** int64 amounts: negative, zero, sane, absurd. */
export const anyAmountMinor = fc.oneof(
  fc.bigInt({ min: I64_MIN, max: 0n }),
  fc.bigInt({ min: 1n, max: MAX_AMOUNT }),
  fc.constantFrom(I64_MIN, -1n, 0n, 1n, MAX_AMOUNT, MAX_AMOUNT + 1n, I64_MAX),
  fc.bigInt({ min: MAX_AMOUNT + 1n, max: I64_MAX }),
);

export interface MoneyInit {
  amountMinor: bigint;
  currency: string;
}
export const anyMoney: fc.Arbitrary<MoneyInit | undefined> = fc.option(fc.record({ amountMinor: anyAmountMinor, currency: anyCurrency }), {
  nil: undefined,
  freq: 6,
});
export const validMoney: fc.Arbitrary<MoneyInit> = fc.record({ amountMinor: fc.bigInt({ min: 1n, max: MAX_AMOUNT }), currency: fc.constantFrom(...ISO_4217) });

/** uint32 values across the boundaries (page sizes, ttl, wait). */
export const anyU32 = fc.oneof(
  fc.constantFrom(0, 1, 99, 100, 500, 501, 1000, 1001, 60_000, 60_001, 600_000, 600_001, 2 ** 31, 2 ** 32 - 1),
  fc.nat({ max: 2 ** 32 - 1 }),
);

/** Page tokens: random text, base64 of random JSON, and near-misses of real tokens. */
export const anyPageToken = fc.oneof(
  fc.constant(""),
  hostileString(600),
  fc.base64String({ maxLength: 200 }),
  fc
    .tuple(
      fc.oneof(
        fc.constantFrom(
          "0",
          "1",
          "2020",
          "2020-02-30",
          "2020-13-01",
          "June 1",
          "+275760-09-13T00:00:00.000Z",
          "-000001-01-01T00:00:00Z",
          "2024-01-01T00:00:00.123456Z",
          "Infinity",
          "1e5",
        ),
        fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        fc.string(),
      ),
      fc.oneof(validId, fc.string(), fc.constant(1 as unknown as string)),
    )
    .map((t) => Buffer.from(JSON.stringify(t)).toString("base64url")),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString("base64url")),
);

export const isValidId = (s: string): boolean => ID_RE.test(s);
export const isValidBeneficiary = (s: string): boolean => BENEFICIARY_RE.test(s);

/** The field SPEC step 0 must name for money, or undefined when it is valid. */
export function moneyViolation(field: string, m: MoneyInit | undefined): string | undefined {
  if (!m) return field;
  if (m.amountMinor <= 0n || m.amountMinor > MAX_AMOUNT) return `${field}.amount_minor`;
  if (!ISO_4217.has(m.currency)) return `${field}.currency`;
  return undefined;
}

/** Free text of bounded length (client references, actors, notes, owners): true when the API must refuse it. */
export function textViolation(value: string, min: number, max: number): boolean {
  return value.length < min || value.length > max || FORBIDDEN_IN_TEXT.test(value);
}
