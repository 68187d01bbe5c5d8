import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { describe, expect, it } from "vitest";
import { codeRuleViolations, SPEC_CODE_EXCEPTIONS, sendsRetryHint } from "./code-rule.js";
import { DomainError, railError, toConnectError } from "./errors.js";
import { RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { ALL_REASONS, REASONS } from "./reasons.js";

/** HTTP statuses generic retry middleware repeats after their Retry-After. */
const RETRIED_BY_MIDDLEWARE = new Set([429, 503]);

describe("rule C1: codes follow the retry class (decision 053)", () => {
  it("holds for the whole catalogue", () => {
    expect(codeRuleViolations(ALL_REASONS)).toEqual([]);
  });

  it("no final or check-status reason travels with a status retry middleware repeats (429, 503)", () => {
    const offending = ALL_REASONS.filter((e) => (e.retry === "final" || e.retry === "check-status") && RETRIED_BY_MIDDLEWARE.has(codeToHttpStatus(e.code)));
    expect(offending.map((e) => e.id)).toEqual([]);
    // The codes the rule treats as hinted are exactly those statuses.
    for (const e of ALL_REASONS) expect(sendsRetryHint(e.code), e.id).toBe(RETRIED_BY_MIDDLEWARE.has(codeToHttpStatus(e.code)));
  });

  it("aborted is transient only for the SPEC's IDEMPOTENCY_CONFLICT (409 by the contract), and that one names its retry hint", () => {
    expect(ALL_REASONS.filter((e) => e.code === Code.Aborted && e.retry === "transient").map((e) => e.id)).toEqual(["IDEMPOTENCY_CONFLICT"]);
    expect([...SPEC_CODE_EXCEPTIONS.keys()]).toEqual(["IDEMPOTENCY_CONFLICT"]);
  });

  it("negative control: a planted final reason coded resource_exhausted, and a transient one coded aborted, are caught", () => {
    const planted = [
      { id: "PLANTED_FINAL", code: Code.ResourceExhausted, retry: "final" as const },
      { id: "PLANTED_CHECK", code: Code.Unavailable, retry: "check-status" as const },
      { id: "PLANTED_TRANSIENT", code: Code.Aborted, retry: "transient" as const },
    ];
    const found = codeRuleViolations([...ALL_REASONS, ...planted]);
    expect(found.map((v) => v.id)).toEqual(["PLANTED_FINAL", "PLANTED_CHECK", "PLANTED_TRANSIENT"]);
    expect(found[0]!.problem).toMatch(/final travels with ResourceExhausted .*retry middleware/);
  });
});

describe("every 429 and 503 refusal carries a retry hint", () => {
  const hinted = ALL_REASONS.filter((e) => sendsRetryHint(e.code));

  it("covers the transient and rate-limit reasons", () => {
    expect(hinted.map((e) => e.id)).toEqual(expect.arrayContaining(["PAYDB_UNAVAILABLE", "CLIENT_RATE_LIMITED", "SHUTTING_DOWN"]));
  });

  it("railError and DomainError add RetryInfo, Retry-After and grpc-retry-pushback-ms, with a default when the throw site named none", () => {
    for (const e of hinted) {
      for (const ce of [railError(e, "m"), toConnectError(new DomainError(e, "m"))]) {
        expect(ce.findDetails(RetryInfoSchema)[0]?.retryDelay?.seconds, e.id).toBe(1n);
        expect(ce.metadata.get("retry-after"), e.id).toBe("1");
        expect(ce.metadata.get("grpc-retry-pushback-ms"), e.id).toBe("1000");
      }
    }
    const named = railError(REASONS.CLIENT_RATE_LIMITED, "m", {}, { retryAfterMs: 2500 });
    expect(named.metadata.get("retry-after")).toBe("3");
    expect(named.metadata.get("grpc-retry-pushback-ms")).toBe("2500");
  });

  it("a final refusal carries none", () => {
    const ce = railError(REASONS.FENCED_OUT, "m");
    expect(ce.findDetails(RetryInfoSchema)).toEqual([]);
    expect(ce.metadata.has("retry-after")).toBe(false);
    expect(ce.metadata.has("grpc-retry-pushback-ms")).toBe(false);
  });

  it("a framework unavailable gets the default hint; a framework resource_exhausted becomes invalid_argument MESSAGE_TOO_LARGE", () => {
    const down = toConnectError(new ConnectError("stream failed", Code.Unavailable));
    expect(down.metadata.get("retry-after")).toBe("1");
    expect(down.findDetails(RetryInfoSchema)).toHaveLength(1);
    const big = toConnectError(new ConnectError("message size 99 is larger than configured readMaxBytes 10", Code.ResourceExhausted));
    expect(big.code).toBe(Code.InvalidArgument);
    expect(big.metadata.has("retry-after")).toBe(false);
  });

  it("a catalogued 429 thrown as a ConnectError keeps its code and reason", () => {
    const ce = toConnectError(railError(REASONS.ACCOUNT_DAILY_LIMIT_EXCEEDED, "m", {}, { retryAfterMs: 5000 }));
    expect(ce.code).toBe(Code.ResourceExhausted);
    expect(ce.metadata.get("retry-after")).toBe("5");
  });
});
