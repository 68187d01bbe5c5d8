import { describe, expect, it } from "vitest";
import { INT8_MAX, INT8_MIN, int8 } from "./int8.js";

describe("int8", () => {
  it("reads pg's int8 text, etcd's revisions and exact numbers", () => {
    expect(int8("0")).toBe(0n);
    expect(int8("9223372036854775807")).toBe(INT8_MAX);
    expect(int8("-9223372036854775808")).toBe(INT8_MIN);
    expect(int8(42)).toBe(42n);
    expect(int8(7n)).toBe(7n);
  });

  it("refuses what BigInt would read wrongly or past int8, naming the field", () => {
    for (const bad of ["", " 1", "1 ", "0x10", "1e3", "1.0", "+1", "9223372036854775808", "-9223372036854775809", "99999999999999999999"]) {
      expect(() => int8(bad, "fence"), bad).toThrow(/^fence: /);
    }
    expect(() => int8(1.5)).toThrow(RangeError);
    expect(() => int8(2 ** 60)).toThrow(RangeError);
    expect(() => int8(2n ** 63n)).toThrow(/outside int8/);
  });
});
