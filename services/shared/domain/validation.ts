/**
 * Input validation shared by every API that takes ids and money. Validation runs before any
 * write, and every failure names the field (ErrorInfo metadata "field") and a reason.
 *
 * Alphabets are deliberately ASCII-only: unicode confusables ("аcc-1" with a Cyrillic a)
 * would otherwise let two ids that look identical fence each other out or not at all.
 */
import { DomainError, invalidArgument, REASONS } from "./errors.js";
import { ISO_4217 } from "./iso4217.js";

export const ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;
export const BENEFICIARY_PATTERN = /^[A-Za-z0-9._:/-]{1,128}$/;
/** PostgreSQL bigint ceiling: tokens travel as uint64 but are stored as bigint. */
export const MAX_TOKEN = (1n << 63n) - 1n;
/** 10^15 minor units: far above any real payout, far below bigint overflow in sums. */
export const MAX_AMOUNT_MINOR = 1_000_000_000_000_000n;

export function checkId(field: string, value: string): string {
  if (value.length === 0) throw invalidArgument(field, REASONS.FIELD_REQUIRED, `${field} is required`);
  if (!ID_PATTERN.test(value)) {
    throw invalidArgument(field, REASONS.FIELD_INVALID, `${field} must be 1-64 characters of [A-Za-z0-9._:-]`);
  }
  return value;
}

export function checkBeneficiary(field: string, value: string): string {
  if (value.length === 0) throw invalidArgument(field, REASONS.FIELD_REQUIRED, `${field} is required`);
  if (!BENEFICIARY_PATTERN.test(value)) {
    throw invalidArgument(field, REASONS.FIELD_INVALID, `${field} must be 1-128 characters of [A-Za-z0-9._:/-]`);
  }
  return value;
}

export function checkToken(field: string, value: bigint): bigint {
  if (value <= 0n) throw invalidArgument(field, REASONS.TOKEN_INVALID, `${field} must be > 0`);
  if (value > MAX_TOKEN) throw invalidArgument(field, REASONS.TOKEN_INVALID, `${field} must be <= 2^63-1`);
  return value;
}

export interface MoneyInput {
  amountMinor: bigint;
  currency: string;
}

export function checkMoney(field: string, money: MoneyInput | undefined): MoneyInput {
  if (!money) throw invalidArgument(field, REASONS.FIELD_REQUIRED, `${field} is required`);
  if (money.amountMinor <= 0n) {
    throw invalidArgument(`${field}.amount_minor`, REASONS.AMOUNT_INVALID, `${field}.amount_minor must be > 0`);
  }
  if (money.amountMinor > MAX_AMOUNT_MINOR) {
    throw invalidArgument(`${field}.amount_minor`, REASONS.AMOUNT_INVALID, `${field}.amount_minor must be <= 10^15`);
  }
  if (!ISO_4217.has(money.currency)) {
    throw invalidArgument(`${field}.currency`, REASONS.CURRENCY_INVALID, `${field}.currency must be an ISO-4217 code`);
  }
  return { amountMinor: money.amountMinor, currency: money.currency };
}

/**
 * Characters free text may not contain, because they are invisible, reorder or break what a
 * human or a log reader sees, or cannot be stored as UTF-8 (decision 009):
 * - Cc: C0 controls, DEL and C1 controls (U+0080..U+009F: U+009B is a terminal CSI);
 * - Zl, Zp: U+2028 / U+2029, line breaks to a log or JSON-lines reader;
 * - Cf and Default_Ignorable_Code_Point: bidi embeddings, overrides and isolates
 *   (U+202A..U+202E, U+2066..U+2069, U+061C, U+200E/U+200F), zero-width characters
 *   (U+200B..U+200D, U+2060, U+FEFF), soft hyphen, Hangul fillers, variation selectors and tag
 *   characters (which is why emoji ZWJ sequences and "❤️" are refused too);
 * - Cs: lone surrogates (no UTF-8 form), and noncharacters (U+FFFE, U+FDD0.., ...).
 */
export const FORBIDDEN_TEXT_CHARACTER = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\p{Noncharacter_Code_Point}]/u;

/** "U+009B" for the first forbidden character of value, or undefined. */
export function forbiddenCharacter(value: string): string | undefined {
  const m = FORBIDDEN_TEXT_CHARACTER.exec(value);
  return m ? `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}` : undefined;
}

/**
 * Free text of bounded length (client references, actors, notes, owners): anything shown to a
 * human or written to a log. Refused: FORBIDDEN_TEXT_CHARACTER, named in metadata code_point.
 */
export function checkText(field: string, value: string, min: number, max: number): string {
  if (value.length < min) throw invalidArgument(field, REASONS.FIELD_REQUIRED, `${field} is required`);
  if (value.length > max) throw invalidArgument(field, REASONS.FIELD_TOO_LONG, `${field} must be at most ${max} characters`);
  const bad = forbiddenCharacter(value);
  if (bad) {
    throw new DomainError(REASONS.FIELD_INVALID, `${field} must not contain control, format, bidi or invisible characters (found ${bad})`, {
      field,
      code_point: bad,
    });
  }
  return value;
}

/** Page size with a default and a ceiling. */
export function checkPageSize(field: string, value: number, dflt: number, max: number): number {
  if (value === 0) return dflt;
  if (value > max) throw invalidArgument(field, REASONS.PAGE_SIZE_INVALID, `${field} must be at most ${max}`);
  return value;
}
