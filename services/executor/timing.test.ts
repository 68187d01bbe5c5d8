import { describe, expect, it } from "vitest";
import { RENEW_AFTER_TTL_FRACTION, renewDue } from "./timing.js";

describe("renewDue", () => {
  it("renews only once more than a fifth of the TTL has passed since Acquire was sent", () => {
    expect(RENEW_AFTER_TTL_FRACTION).toBe(0.2);
    expect(renewDue(0, 5000)).toBe(false);
    expect(renewDue(999, 5000)).toBe(false);
    expect(renewDue(1000, 5000)).toBe(false);
    expect(renewDue(1001, 5000)).toBe(true);
    expect(renewDue(60_000, 5000)).toBe(true);
    // A TTL too short to wait for at all: every attempt renews.
    expect(renewDue(1, 1)).toBe(true);
  });
});
