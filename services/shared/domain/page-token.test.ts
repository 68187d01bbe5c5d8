import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { toConnectError } from "./errors.js";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { decodePageToken, encodePageToken, isTimestampText } from "./page-token.js";

const reasonOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    const ce = toConnectError(err);
    expect(ce.code).toBe(Code.InvalidArgument);
    const [info] = ce.findDetails(ErrorInfoSchema);
    expect(info?.metadata.field).toBe("page_token");
    return info?.reason;
  }
};

describe("page tokens (one codec for every list)", () => {
  const at = "2026-01-02 03:04:05.123456+00";
  it("round-trips a position within its scope; an empty token is the first page", () => {
    const token = encodePageToken({ at, id: "po_1" }, "ListUnresolved");
    expect(decodePageToken(token, "ListUnresolved", isTimestampText)).toEqual({ at, id: "po_1" });
    expect(decodePageToken("", "ListUnresolved", isTimestampText)).toBeUndefined();
  });

  it("refuses a token issued for another list or filter", () => {
    const token = encodePageToken({ at, id: "po_1" }, 'ListPayouts:["acct-a",0]');
    expect(reasonOf(() => decodePageToken(token, 'ListPayouts:["acct-b",0]', isTimestampText))).toBe("PAGE_TOKEN_INVALID");
    expect(reasonOf(() => decodePageToken(token, "ListUnresolved", isTimestampText))).toBe("PAGE_TOKEN_INVALID");
  });

  it.each([
    ["garbage", "garbage!"],
    ["not JSON", Buffer.from("nope").toString("base64url")],
    ["JSON null", Buffer.from("null").toString("base64url")],
    ["another version", Buffer.from(JSON.stringify({ v: 2, c: at, p: "x", f: "s" })).toString("base64url")],
    ["a timestamp PostgreSQL refuses", encodePageToken({ at: "2024-02-30 10:00:00+00", id: "x" }, "s")],
    ["an empty id", encodePageToken({ at, id: "" }, "s")],
    ["too long", "A".repeat(513)],
  ])("refuses %s", (_name, token) => {
    expect(reasonOf(() => decodePageToken(token, "s", isTimestampText))).toBe("PAGE_TOKEN_INVALID");
  });

  it("timestamps: PostgreSQL's text and ISO 8601 pass; Date.parse's leniencies do not", () => {
    for (const ok of [at, "2026-01-02T03:04:05.123456Z", "2026-01-02 03:04:05+05:30"]) expect(isTimestampText(ok), ok).toBe(true);
    for (const bad of ["0", "June 1", "2024-02-30 10:00:00+00", "2024-01-01 24:00:00+00", "0000-12-31T23:59:59Z"])
      expect(isTimestampText(bad), bad).toBe(false);
  });
});
