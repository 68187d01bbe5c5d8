/**
 * Opaque keyset page tokens, one codec for every paged list: the position of the last row of
 * the page (a timestamp and an id) and the scope the token was issued for (the list and its
 * filter). A token from another list or filter, one this codec never made, or one whose
 * timestamp the database would refuse, is PAGE_TOKEN_INVALID: never an internal error, never
 * silently paging through the wrong list.
 */
import { invalidArgument, REASONS } from "./errors.js";

export interface KeysetPosition {
  /** The timestamp column, as the list's store writes it. */
  at: string;
  /** The tie-breaking id. */
  id: string;
}

interface TokenBody {
  v: 1;
  c: string;
  p: string;
  f: string;
}

const MAX_TOKEN_LENGTH = 512;
const MAX_ID_LENGTH = 128;

export function encodePageToken(position: KeysetPosition, scope: string): string {
  const body: TokenBody = { v: 1, c: position.at, p: position.id, f: scope };
  return Buffer.from(JSON.stringify(body)).toString("base64url");
}

/**
 * The position a token holds, undefined for an empty token (the first page). validAt checks the
 * timestamp's shape and calendar (each store has its own text form).
 */
export function decodePageToken(token: string, scope: string, validAt: (at: string) => boolean): KeysetPosition | undefined {
  if (token === "") return undefined;
  const invalid = () => invalidArgument("page_token", REASONS.PAGE_TOKEN_INVALID, "page_token is not a token this service issued for this list and filter");
  let body: Partial<TokenBody> | null;
  try {
    if (token.length > MAX_TOKEN_LENGTH || !/^[A-Za-z0-9_-]+$/.test(token)) throw invalid();
    body = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as Partial<TokenBody> | null;
  } catch {
    throw invalid();
  }
  if (
    body === null ||
    typeof body !== "object" ||
    body.v !== 1 ||
    typeof body.c !== "string" ||
    !validAt(body.c) ||
    typeof body.p !== "string" ||
    body.p.length === 0 ||
    body.p.length > MAX_ID_LENGTH ||
    body.f !== scope
  ) {
    throw invalid();
  }
  return { at: body.c, id: body.p };
}

/**
 * A timestamp as PostgreSQL writes it (`created_at::text`, "2026-01-02 03:04:05.123456+00") or
 * as ISO 8601 with a zone. Date.parse alone accepts "0", "June 1" or February 30, which would
 * reach the database as a timestamptz it refuses: check the shape and that every component is a
 * real calendar value.
 */
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?(Z|[+-]\d{2}(:?\d{2})?)?$/;
export function isTimestampText(text: string): boolean {
  const m = TIMESTAMP.exec(text);
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const day = new Date(Date.UTC(y, mo - 1, d));
  return y >= 1 && h < 24 && mi < 60 && s < 60 && day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d;
}
