import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { DomainError } from "../domain/errors.js";
import { dbCall, isBusyError, isUnavailableError, retryWhileUnavailable } from "./pg.js";

// What node-postgres rejects with when paydb cancels a statement (the server's SQLSTATE in `code`).
const statementTimeout = Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
const lockTimeout = Object.assign(new Error("canceling statement due to lock timeout"), { code: "55P03" });

describe("a slow database (statement or lock timeout)", () => {
  it.each([
    ["57014", statementTimeout],
    ["55P03", lockTimeout],
  ])("%s on a read is UNAVAILABLE PAYDB_BUSY with a retry hint, not internal", async (_code, err) => {
    const refusal = await dbCall("PAYDB", () => Promise.reject(err)).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(DomainError);
    expect(refusal).toMatchObject({ code: Code.Unavailable, reason: "PAYDB_BUSY", retryAfterMs: 1000 });
    expect((refusal as Error).message).not.toContain("statement");
  });

  it("is not 'unreachable': the money path's retries of writes do not repeat it (negative control: a syntax error stays unclassified)", async () => {
    expect(isBusyError(statementTimeout) && !isUnavailableError(statementTimeout)).toBe(true);
    let calls = 0;
    await expect(
      retryWhileUnavailable(async () => {
        calls++;
        throw statementTimeout;
      }),
    ).rejects.toBe(statementTimeout);
    expect(calls).toBe(1);
    const syntax = Object.assign(new Error("syntax error"), { code: "42601" });
    expect(isBusyError(syntax)).toBe(false);
    await expect(dbCall("PAYDB", () => Promise.reject(syntax))).rejects.toBe(syntax);
  });
});
