import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RailfenceError } from "./errors.js";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { ALL_REASONS, findReason, isReason, REASONS } from "./index.js";
import { outcomeUnknown } from "./rail-proxy.js";
import { isTransient } from "./retry.js";

/** What a railfence server answers for a catalogue entry. */
const answer = (code: Code, reason: string) =>
  new ConnectError("refused", code, undefined, [{ desc: ErrorInfoSchema, value: { reason, domain: "railfence.dev", metadata: {} } }] as never);

describe("the library's rules follow the catalogue", () => {
  it("retries exactly the answers the catalogue calls transient, and only on calls protected against duplicates", () => {
    for (const e of ALL_REASONS) {
      expect(isTransient(answer(e.code, e.reason), true), `${e.id} (${e.retry})`).toBe(e.retry === "transient");
      expect(isTransient(answer(e.code, e.reason), false), e.id).toBe(false);
    }
  });

  it("treats RAIL_AMBIGUOUS (and a deadline) as an unknown outcome, never another refusal", () => {
    for (const e of ALL_REASONS) {
      expect(outcomeUnknown(answer(e.code, e.reason)), e.id).toBe(e === REASONS.RAIL_AMBIGUOUS || e.code === Code.DeadlineExceeded);
    }
  });

  it("lets a caller branch on a RailfenceError with the catalogue", () => {
    const err = new RailfenceError(answer(Code.ResourceExhausted, "ACCOUNT_DAILY_LIMIT_EXCEEDED"), false);
    expect(isReason(err, REASONS.ACCOUNT_DAILY_LIMIT_EXCEEDED)).toBe(true);
    expect(isReason(err, REASONS.CLIENT_RATE_LIMITED)).toBe(false);
    expect(findReason(err.code, err.reason)?.retry).toBe("later");
  });
});
