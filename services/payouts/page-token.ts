/**
 * Opaque ListPayouts page tokens: the keyset position (created_at with microseconds,
 * payout_id) plus the filter they were issued for. A token used with another filter, or one
 * this service never issued, is refused (PAGE_TOKEN_INVALID) instead of silently paging
 * through the wrong list.
 */
import { invalidArgument, REASONS } from "../shared/errors.js";
import type { PageCursor } from "./payout-store.js";

interface TokenBody {
  v: 1;
  c: string;
  p: string;
  a: string;
  s: number;
}

export interface ListFilter {
  accountId: string;
  state: number;
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export function encodePageToken(cursor: PageCursor, filter: ListFilter): string {
  const body: TokenBody = { v: 1, c: cursor.createdAt, p: cursor.payoutId, a: filter.accountId, s: filter.state };
  return Buffer.from(JSON.stringify(body)).toString("base64url");
}

/** Undefined for an empty token (first page). */
export function decodePageToken(token: string, filter: ListFilter): PageCursor | undefined {
  if (token === "") return undefined;
  const invalid = () => invalidArgument("page_token", REASONS.PAGE_TOKEN_INVALID, "page_token is not a token this service issued for this filter");
  let body: Partial<TokenBody>;
  try {
    if (token.length > 512 || !/^[A-Za-z0-9_-]+$/.test(token)) throw invalid();
    body = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as Partial<TokenBody>;
  } catch {
    throw invalid();
  }
  if (
    body === null ||
    typeof body !== "object" ||
    body.v !== 1 ||
    typeof body.c !== "string" ||
    !TIMESTAMP.test(body.c) ||
    Number.isNaN(Date.parse(body.c)) ||
    typeof body.p !== "string" ||
    body.p.length === 0 ||
    body.p.length > 64 ||
    body.a !== filter.accountId ||
    body.s !== filter.state
  ) {
    throw invalid();
  }
  return { createdAt: body.c, payoutId: body.p };
}
