import { describe, expect, it } from "vitest";
import { retryWhileUnavailable } from "./pg.js";

const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });

describe("retryWhileUnavailable", () => {
  it("retries while the database is unreachable, then returns the write's result", async () => {
    let calls = 0;
    const result = await retryWhileUnavailable(async () => {
      calls++;
      if (calls < 3) throw refused;
      return "written";
    });
    expect(result).toBe("written");
    expect(calls).toBe(3);
  });

  it("gives up after the last try with the unavailability", async () => {
    let calls = 0;
    await expect(
      retryWhileUnavailable(async () => {
        calls++;
        throw refused;
      }, 3),
    ).rejects.toBe(refused);
    expect(calls).toBe(3);
  });

  it("throws any other error at once, without retrying", async () => {
    let calls = 0;
    const constraint = Object.assign(new Error("duplicate key"), { code: "23505" });
    await expect(
      retryWhileUnavailable(async () => {
        calls++;
        throw constraint;
      }),
    ).rejects.toBe(constraint);
    expect(calls).toBe(1);
  });
});
