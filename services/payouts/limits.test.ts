import { describe, expect, it } from "vitest";
import { Code } from "@connectrpc/connect";
import { dailyAmountLimit, limitExceeded, parseDailyAmounts } from "./limits.js";
import { readConfig } from "./config.js";

describe("LIMIT_ACCOUNT_DAILY_AMOUNT", () => {
  it("reads per-currency limits, off, and the required * for every other currency", () => {
    const m = parseDailyAmounts("EUR=500000, USD=off,*=1000");
    expect(m).toEqual({ EUR: 500000n, USD: null, "*": 1000n });
    const cfg = { clientRequests: 0, clientWindowMs: 60_000, accountDailyAmount: m };
    expect(dailyAmountLimit(cfg, "EUR")).toBe(500000n);
    expect(dailyAmountLimit(cfg, "USD")).toBeNull();
    expect(dailyAmountLimit(cfg, "GBP")).toBe(1000n);
  });

  it.each(["EUR=5", "EUR=5,*=x", "eur=5,*=1", "EUR=-1,*=1", "*=1,*=2", "EUR=1.5,*=1"])("refuses %j", (text) => {
    expect(() => parseDailyAmounts(text)).toThrow();
  });

  it("is part of the payouts config: a bad value stops start-up with the variable named", () => {
    expect(() => readConfig({ PAYDB_URL: "postgres://x@127.0.0.1/paydb", LIMIT_ACCOUNT_DAILY_AMOUNT: "EUR=5" })).toThrow(/LIMIT_ACCOUNT_DAILY_AMOUNT/);
    const c = readConfig({ PAYDB_URL: "postgres://x@127.0.0.1/paydb" });
    expect(c.limits).toMatchObject({ clientRequests: 6000, clientWindowMs: 60_000, accountDailyAmount: { "*": 1000000000n } });
    expect(c.limitsDbUrl).toBe("postgres://x@127.0.0.1/paydb");
  });
});

describe("limit refusals", () => {
  const req = { accountId: "a", currency: "EUR", amountMinor: 100n };
  const resetsAt = new Date(Date.now() + 30_000);
  it("are RESOURCE_EXHAUSTED with the limit's reason and a retry hint until the window ends", () => {
    const e = limitExceeded({ kind: "exceeded", limit: "ACCOUNT_DAILY_AMOUNT", used: 950n, limitValue: 1000n, resetsAt }, req);
    expect(e.code).toBe(Code.ResourceExhausted);
    expect(e.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
    expect(e.retryAfterMs).toBeGreaterThan(25_000);
    const r = limitExceeded({ kind: "exceeded", limit: "CLIENT_RATE", used: 5n, limitValue: 5n, resetsAt }, req);
    expect(r.reason).toBe("CLIENT_RATE_LIMITED");
    expect(r.metadata).toMatchObject({ limit: "client_rate", limit_value: "5" });
  });

  it("are final, with no retry hint, when the payout alone is over the daily limit", () => {
    const e = limitExceeded({ kind: "exceeded", limit: "ACCOUNT_DAILY_AMOUNT", used: 0n, limitValue: 99n, resetsAt }, req);
    expect(e.retryAfterMs).toBeUndefined();
    expect(e.reason).toBe("PAYOUT_ABOVE_DAILY_LIMIT");
    expect(e.code).toBe(Code.FailedPrecondition);
  });
});
