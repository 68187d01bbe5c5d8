/**
 * Output formatting and error reports: what operators read and what scripts parse.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { codeName, describeError, exitCodeFor, formatErrorReport } from "../../services/cli/error-report.js";
import { EXIT_NOT_FOUND, EXIT_OUTCOME_UNKNOWN, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE } from "../../services/cli/exit-codes.js";
import { formatFields, formatMoney, formatTable, messageJson } from "../../services/cli/output.js";
import { submissionDetail, submissionTable } from "../../services/cli/views.js";
import { railError, REASONS, type ReasonEntry } from "../../services/shared/domain/errors.js";
import { ListUnresolvedResponseSchema, SubmissionSchema, SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";

const submission = create(SubmissionSchema, {
  payoutId: "p-1",
  accountId: "acc-1",
  fencingToken: 9007199254740993n, // above 2^53: must not lose precision anywhere
  amount: { amountMinor: 1050n, currency: "EUR" },
  beneficiary: "ben-1",
  state: SubmissionState.TIMEOUT,
  replicaId: "rail-proxy-1",
  createdAt: timestampFromDate(new Date("2026-01-02T03:04:05.000Z")),
  ambiguous: true,
});

describe("money", () => {
  it("shows minor units in the currency's exponent, with integer arithmetic", () => {
    expect(formatMoney({ amountMinor: 1050n, currency: "EUR" })).toBe("10.50 EUR");
    expect(formatMoney({ amountMinor: 5n, currency: "USD" })).toBe("0.05 USD");
    expect(formatMoney({ amountMinor: 1050n, currency: "JPY" })).toBe("1050 JPY");
    expect(formatMoney({ amountMinor: 1234n, currency: "BHD" })).toBe("1.234 BHD");
    expect(formatMoney({ amountMinor: 999999999999999999n, currency: "EUR" })).toBe("9999999999999999.99 EUR");
    expect(formatMoney(undefined)).toBe("");
  });
});

describe("tables and fields", () => {
  it("aligns columns to the widest cell and fills empty cells with -", () => {
    const text = formatTable(
      ["A", "LONGER"],
      [
        ["x", ""],
        ["wide-cell", "y"],
      ],
    );
    expect(text.split("\n")).toEqual(["A          LONGER", "x          -", "wide-cell  y"]);
  });

  it("aligns label/value pairs", () => {
    expect(
      formatFields([
        ["a", "1"],
        ["long", ""],
      ]),
    ).toBe("a     1\nlong  -");
  });

  it("a submission view says it is ambiguous and keeps a >2^53 token exact", () => {
    const text = submissionDetail(submission);
    expect(text).toMatch(/^state\s+TIMEOUT \(AMBIGUOUS: unresolved\)$/m);
    expect(text).toMatch(/^fencing_token\s+9007199254740993$/m);
    expect(text).toMatch(/^amount\s+10\.50 EUR$/m);
    expect(text).toMatch(/^created_at\s+2026-01-02T03:04:05\.000Z$/m);
    const table = submissionTable([submission]).split("\n");
    expect(table[0]).toMatch(/^PAYOUT\s+ACCOUNT\s+STATE\s+AMOUNT\s+TOKEN/);
    expect(table[1]).toContain("TIMEOUT");
    expect(table[1]).toContain("9007199254740993");
  });

  it("JSON uses the canonical protobuf mapping and keeps empty fields (stable keys)", () => {
    const json = messageJson(ListUnresolvedResponseSchema, create(ListUnresolvedResponseSchema, { submissions: [submission] })) as {
      submissions: Array<Record<string, unknown>>;
      nextPageToken: string;
    };
    expect(json.nextPageToken).toBe("");
    expect(json.submissions[0]).toMatchObject({
      payoutId: "p-1",
      fencingToken: "9007199254740993",
      state: "SUBMISSION_STATE_TIMEOUT",
      amount: { amountMinor: "1050", currency: "EUR" },
      ambiguous: true,
      railReference: "",
    });
    const empty = messageJson(ListUnresolvedResponseSchema, create(ListUnresolvedResponseSchema, {})) as Record<string, unknown>;
    expect(empty).toEqual({ submissions: [], nextPageToken: "" });
  });
});

describe("error reports", () => {
  it("spells codes the way Connect documents them", () => {
    expect(codeName(Code.NotFound)).toBe("not_found");
    expect(codeName(Code.InvalidArgument)).toBe("invalid_argument");
    expect(codeName(Code.Aborted)).toBe("aborted");
  });

  it("maps codes to exit codes: not found 4, unavailable 3, other refusals 1", () => {
    expect(exitCodeFor(railError(REASONS.SUBMISSION_NOT_FOUND, "x"))).toBe(EXIT_NOT_FOUND);
    expect(exitCodeFor(new ConnectError("connect ECONNREFUSED", Code.Unavailable))).toBe(EXIT_UNREACHABLE);
    expect(exitCodeFor(railError(REASONS.PAYDB_UNAVAILABLE, "x", {}, { retryAfterMs: 1000 }))).toBe(EXIT_UNREACHABLE);
    expect(exitCodeFor(new ConnectError("deadline", Code.DeadlineExceeded))).toBe(EXIT_UNREACHABLE);
    expect(exitCodeFor(railError(REASONS.FENCED_OUT, "x"))).toBe(EXIT_REFUSED);
    expect(exitCodeFor(railError(REASONS.FIELD_INVALID, "x", { field: "payout_id" }))).toBe(EXIT_REFUSED);
  });

  it("a call with an effect that got no answer exits 6 (outcome unknown), never 1; a read exits 3; a TLS configuration failure exits 2", () => {
    const reset = new ConnectError("read ECONNRESET", Code.Aborted, undefined, undefined, Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }));
    expect(exitCodeFor(reset, true)).toBe(EXIT_OUTCOME_UNKNOWN);
    expect(exitCodeFor(reset, false)).toBe(EXIT_UNREACHABLE);
    expect(exitCodeFor(railError(REASONS.CALL_TIMEOUT, "x"), true)).toBe(EXIT_OUTCOME_UNKNOWN);
    // A server's answer stays an answer, with or without an effect.
    expect(exitCodeFor(railError(REASONS.IDEMPOTENCY_KEY_REUSED, "x"), true)).toBe(EXIT_REFUSED);
    const noCert = new ConnectError(
      "alert certificate required",
      Code.Internal,
      undefined,
      undefined,
      Object.assign(new Error("x"), { code: "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED" }),
    );
    expect(exitCodeFor(noCert, true)).toBe(EXIT_USAGE);
    const r = describeError(reset, "http://127.0.0.1:1", true);
    expect(r).toMatchObject({ outcome: "unknown", exitCode: EXIT_OUTCOME_UNKNOWN });
    expect(formatErrorReport(r).split("\n")[0]).toBe("error: outcome unknown (no answer; the request may have been carried out): aborted: read ECONNRESET");
    expect(formatErrorReport(r)).not.toMatch(/refused/);
  });

  it("prints code, reason, message and a hint; retry delays come from RetryInfo", () => {
    const r = describeError(railError(REASONS.IDEMPOTENCY_UNAVAILABLE, "idempotency store down", {}, { retryAfterMs: 2500 }));
    expect(r).toMatchObject({ code: "unavailable", reason: "IDEMPOTENCY_UNAVAILABLE", message: "idempotency store down", retryAfterSeconds: 3 });
    expect(r.hint).toContain("retry after 3 s");
    const text = formatErrorReport(r);
    expect(text.split("\n")[0]).toBe("error: unavailable IDEMPOTENCY_UNAVAILABLE: idempotency store down");
    expect(text).toContain("hint: ");
  });

  const hints: Array<[ReasonEntry, RegExp]> = [
    [REASONS.FENCED_OUT, /do not resubmit/i],
    [REASONS.DUPLICATE_SUBMISSION, /never resubmit/i],
    [REASONS.RAIL_AMBIGUOUS, /do not resubmit/i],
    [REASONS.IDEMPOTENCY_CONFLICT, /same key/],
    [REASONS.NOT_AMBIGUOUS, /clear outcome/],
    [REASONS.SUBMISSION_NOT_FOUND, /never admitted/],
    [REASONS.LOCK_HELD, /locks inspect/],
  ];
  for (const [entry, hint] of hints) {
    it(`gives ${entry.reason} a hint`, () => {
      expect(describeError(railError(entry, "m")).hint).toMatch(hint);
    });
  }

  it("names the bad field of an invalid argument", () => {
    const r = describeError(railError(REASONS.FIELD_INVALID, "payout_id must be ...", { field: "payout_id" }));
    expect(r.hint).toContain("payout_id");
    expect(formatErrorReport(r)).toContain("details: field=payout_id");
  });

  it("says where it could not connect", () => {
    const r = describeError(new ConnectError("connect ECONNREFUSED 127.0.0.1:1", Code.Unavailable), "http://127.0.0.1:1");
    expect(r.reason).toBe("");
    expect(r.exitCode).toBe(EXIT_UNREACHABLE);
    expect(r.hint).toContain("http://127.0.0.1:1");
  });
});
