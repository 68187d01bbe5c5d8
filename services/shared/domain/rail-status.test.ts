import { describe, expect, it } from "vitest";
import { PaymentStatus } from "../gen/railfence/rail/v1/rail_pb.js";
import { railStatusName, readRailStatus } from "./rail-status.js";

describe("reading a rail status", () => {
  it("only the two documented statuses are answers", () => {
    expect(readRailStatus(PaymentStatus.ACCEPTED)).toBe("ACCEPTED");
    expect(readRailStatus(PaymentStatus.REJECTED)).toBe("REJECTED");
  });

  it("a status left unset, or one this build does not know, proves nothing: UNKNOWN, never REJECTED", () => {
    for (const status of [PaymentStatus.UNSPECIFIED, 3, 7, 99, -1]) expect(readRailStatus(status)).toBe("UNKNOWN");
  });

  it("names the status for logs, by number when this build does not know it", () => {
    expect(railStatusName(PaymentStatus.UNSPECIFIED)).toBe("UNSPECIFIED");
    expect(railStatusName(7)).toBe("7");
  });
});
