import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { DomainError, errorInfo, frameworkReason, hasReason, isCatalogued, railError, toConnectError } from "./errors.js";
import { ALL_REASONS, AREAS, findReason, isReason, REASONS, TRANSIENT_REASONS, type ReasonEntry } from "./reasons.js";

const CODES = Object.values(Code).filter((c): c is Code => typeof c === "number");

describe("the reason catalogue", () => {
  it("holds UPPER_SNAKE reasons, each (code, reason) pair once, each with a one-line meaning and a known area", () => {
    const pairs = new Set<string>();
    for (const e of ALL_REASONS) {
      expect(e.id, e.id).toMatch(/^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/);
      expect(e.reason, e.id).toMatch(/^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/);
      expect(REASONS[e.id]).toBe(e);
      expect(pairs.has(`${e.code}/${e.reason}`), `${e.id} repeats a (code, reason) pair`).toBe(false);
      pairs.add(`${e.code}/${e.reason}`);
      expect(e.meaning, e.id).toMatch(/^[^\n|]{10,200}\.$/);
      expect(Object.keys(AREAS), e.id).toContain(e.area);
      expect(Object.isFrozen(e), e.id).toBe(true);
    }
  });

  it("names every entry by its wire reason, and each wire reason travels with one code (decision 067)", () => {
    expect(ALL_REASONS.filter((e) => e.id !== e.reason).map((e) => e.id)).toEqual([]);
    const codes = new Map<string, Set<Code>>();
    for (const e of ALL_REASONS) codes.set(e.reason, (codes.get(e.reason) ?? new Set()).add(e.code));
    expect([...codes].filter(([, c]) => c.size > 1).map(([r]) => r)).toEqual([]);
    expect(findReason(Code.NotFound, "PAYOUT_NOT_FOUND")).toBe(REASONS.PAYOUT_NOT_FOUND);
    expect(findReason(Code.FailedPrecondition, "BOUND_PAYOUT_NOT_FOUND")).toBe(REASONS.BOUND_PAYOUT_NOT_FOUND);
    expect(findReason(Code.FailedPrecondition, "PAYOUT_NOT_FOUND")).toBeUndefined();
  });

  it("calls every unavailable answer transient, and only unavailable, deadline and IDEMPOTENCY_CONFLICT answers (code-rule.ts)", () => {
    for (const e of ALL_REASONS) {
      if (e.code === Code.Unavailable) expect(e.retry, e.id).toBe("transient");
      if (e.retry === "transient") expect([Code.Unavailable, Code.DeadlineExceeded].includes(e.code) || e === REASONS.IDEMPOTENCY_CONFLICT, e.id).toBe(true);
    }
    expect([...TRANSIENT_REASONS]).toContain("IDEMPOTENCY_CONFLICT");
    expect([...TRANSIENT_REASONS]).not.toContain("LOCK_HELD");
  });

  it("compares code and reason together", () => {
    expect(isReason({ code: Code.Aborted, reason: "FENCED_OUT" }, REASONS.FENCED_OUT)).toBe(true);
    expect(isReason({ code: Code.FailedPrecondition, reason: "FENCED_OUT" }, REASONS.FENCED_OUT)).toBe(false);
    expect(hasReason(railError(REASONS.BOUND_PAYOUT_NOT_FOUND, "m"), REASONS.PAYOUT_NOT_FOUND)).toBe(false);
    expect(hasReason(railError(REASONS.BOUND_PAYOUT_NOT_FOUND, "m"), REASONS.BOUND_PAYOUT_NOT_FOUND)).toBe(true);
  });
});

describe("errors.ts builds refusals from the catalogue only", () => {
  it("takes the code from the entry, for every entry, through railError and DomainError alike", () => {
    for (const e of ALL_REASONS) {
      for (const ce of [railError(e, "m", { k: "v" }), toConnectError(new DomainError(e, "m", { k: "v" }))]) {
        expect(ce.code, e.id).toBe(e.code);
        expect(errorInfo(ce), e.id).toMatchObject({ reason: e.reason, domain: "railfence.dev", metadata: { k: "v" } });
      }
    }
  });

  it("gives a framework error of any code a catalogued reason (the code's name; internal and unknown become INTERNAL, resource_exhausted MESSAGE_TOO_LARGE)", () => {
    for (const code of CODES) {
      const ce = toConnectError(new ConnectError("from the framework", code));
      const reason = errorInfo(ce)?.reason ?? "";
      const entry = findReason(ce.code, reason);
      expect(entry, `${Code[code]} -> ${Code[ce.code]} ${reason}`).toBeDefined();
      if (code === Code.Internal || code === Code.Unknown) expect(entry).toBe(REASONS.INTERNAL);
      else if (code === Code.ResourceExhausted) expect(entry).toBe(REASONS.MESSAGE_TOO_LARGE);
      else {
        expect(ce.code).toBe(code);
        expect(frameworkReason(code)).toBe(entry);
      }
    }
  });

  it("refuses a forged entry: railError throws, and a DomainError carrying one is answered as INTERNAL", () => {
    const forged = { ...REASONS.FENCED_OUT, reason: "NOT_IN_THE_CATALOGUE" } as unknown as ReasonEntry;
    expect(isCatalogued(forged)).toBe(false);
    expect(() => railError(forged, "m")).toThrow(TypeError);
    const ce = toConnectError(new DomainError(forged, "leaked text"));
    expect(ce.code).toBe(Code.Internal);
    expect(errorInfo(ce)?.reason).toBe("INTERNAL");
    expect(ce.rawMessage).toBe("internal error");
    // A copy of a real entry is not the entry: only the catalogue's own objects pass.
    expect(isCatalogued({ ...REASONS.FENCED_OUT })).toBe(false);
    expect(isCatalogued(REASONS.FENCED_OUT)).toBe(true);
  });
});
