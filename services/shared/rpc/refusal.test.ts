import { Code } from "@connectrpc/connect";
import { endStreamFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { describe, expect, it } from "vitest";
import { errorInfo, railError, REASONS } from "../domain/errors.js";
import { encodeRefusal } from "./refusal.js";
import { requestProtocol } from "./wire-protocol.js";

const error = railError(REASONS.REQUEST_TOO_LARGE, "request message larger than 16 bytes", { limit_bytes: "16" });
const headersOf = (h: Record<string, unknown>) =>
  new Headers(
    Object.entries(h)
      .filter(([k]) => !k.startsWith(":"))
      .map(([k, v]) => [k, String(v)]),
  );

describe("encodeRefusal", () => {
  it("gRPC and gRPC-Web: trailers-only, status and ErrorInfo readable by a client", () => {
    for (const ct of ["application/grpc", "application/grpc+json", "application/grpc-web+proto"]) {
      const { headers, body } = encodeRefusal(error, requestProtocol("POST", ct, false));
      expect(body).toBeUndefined();
      expect(headers[":status"]).toBe(200);
      const read = findTrailerError(headersOf(headers));
      expect(read?.code).toBe(Code.InvalidArgument);
      expect(errorInfo(read)?.reason).toBe("REQUEST_TOO_LARGE");
    }
  });

  it("Connect unary: the code's HTTP status (400 for invalid_argument) and a Connect error body; streaming: an end-stream message", () => {
    const unary = encodeRefusal(error, requestProtocol("POST", "application/proto", false));
    expect(unary.headers[":status"]).toBe(400);
    expect(errorInfo(errorFromJsonBytes(unary.body!, undefined, new Error("x") as never))?.metadata).toEqual({ limit_bytes: "16" });
    const stream = encodeRefusal(error, requestProtocol("POST", "application/connect+json", true));
    expect(stream.body![0]).toBe(2);
    expect(errorInfo(endStreamFromJson(stream.body!.subarray(5)).error)?.reason).toBe("REQUEST_TOO_LARGE");
  });

  it("no protocol at all: the given HTTP status with a Connect error body curl users can read", () => {
    const r = encodeRefusal(railError(REASONS.UNSUPPORTED_CONTENT_TYPE, "unsupported content type"), undefined, 415);
    expect(r.headers[":status"]).toBe(415);
    expect(JSON.parse(new TextDecoder().decode(r.body))).toMatchObject({ code: "unimplemented", message: "unsupported content type" });
  });
});
