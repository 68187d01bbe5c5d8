// Negative controls for the history checker used by the conformance suite: a checker that
// cannot see an overlap or a token regression would make the mutual-exclusion test decorative.
import { describe, expect, it } from "vitest";
import { checkHistory, type LockEvent } from "./history.js";

describe("lock history checker", () => {
  it("accepts alternating grants and releases with rising tokens", () => {
    const h: LockEvent[] = [
      { kind: "grant", client: 1, token: 1n },
      { kind: "release", client: 1, token: 1n },
      { kind: "grant", client: 2, token: 5n },
      { kind: "release", client: 2, token: 5n },
    ];
    expect(checkHistory(h)).toEqual({ grants: 2, overlaps: [], tokenRegressions: [] });
  });

  it("reports a grant while another client still holds the lock", () => {
    const h: LockEvent[] = [
      { kind: "grant", client: 1, token: 1n },
      { kind: "grant", client: 2, token: 2n },
      { kind: "release", client: 1, token: 1n },
      { kind: "release", client: 2, token: 2n },
    ];
    expect(checkHistory(h).overlaps).toHaveLength(1);
  });

  it("reports a token that does not rise", () => {
    const h: LockEvent[] = [
      { kind: "grant", client: 1, token: 7n },
      { kind: "release", client: 1, token: 7n },
      { kind: "grant", client: 2, token: 7n },
      { kind: "release", client: 2, token: 7n },
    ];
    expect(checkHistory(h).tokenRegressions).toHaveLength(1);
  });
});
