import { describe, expect, it } from "vitest";
import { callIdsFor, currentCall, REQUEST_ID_MAX_LENGTH, responseIdHeaders, runInCall, traceIdOf, validRequestId } from "./call-context.js";

describe("call ids", () => {
  it("accept a request id of 1..128 visible ASCII characters, and ignore anything else", () => {
    expect(validRequestId("req-1")).toBe("req-1");
    expect(validRequestId("x".repeat(REQUEST_ID_MAX_LENGTH))).toBe("x".repeat(REQUEST_ID_MAX_LENGTH));
    for (const bad of ["", "x".repeat(REQUEST_ID_MAX_LENGTH + 1), "two words", "tab\there", "é", "line\nbreak", undefined]) {
      expect(validRequestId(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it("take the trace id of a valid traceparent, and make a new one otherwise", () => {
    const t = "4bf92f3577b34da6a3ce929d0e0e4736";
    expect(traceIdOf(`00-${t}-00f067aa0ba902b7-01`)).toBe(t);
    expect(traceIdOf(`00-${"0".repeat(32)}-00f067aa0ba902b7-01`)).toBeUndefined();
    expect(traceIdOf("garbage")).toBeUndefined();
    expect(callIdsFor({ traceparent: `00-${t}-00f067aa0ba902b7-01` }).traceId).toBe(t);
    const a = callIdsFor({}).traceId;
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(callIdsFor({}).traceId).not.toBe(a);
  });

  it("echo only a valid request id, and name the span in traceresponse once one exists", () => {
    expect(responseIdHeaders(callIdsFor({ "x-request-id": "r-1" }))).toMatchObject({ "x-request-id": "r-1" });
    expect(responseIdHeaders(callIdsFor({ "x-request-id": "bad id" }))).not.toHaveProperty("x-request-id");
    const ids = { traceId: "a".repeat(32), spanId: "b".repeat(16) };
    expect(responseIdHeaders(ids).traceresponse).toBe(`00-${"a".repeat(32)}-${"b".repeat(16)}-01`);
  });

  it("follow the call through its promises, and nothing outside it", async () => {
    const ids = { traceId: "c".repeat(32), requestId: "r-2" };
    const seen = await runInCall(ids, async () => {
      await new Promise((r) => setTimeout(r, 1));
      return currentCall();
    });
    expect(seen).toBe(ids);
    expect(currentCall()).toBeUndefined();
  });
});
