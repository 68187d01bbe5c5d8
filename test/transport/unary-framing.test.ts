/**
 * The hand-written half of the direct client's framing: reading a unary answer's body. Fuzzed:
 * any bytes give one message, nothing, or a ConnectError of a fixed set of codes, never a throw
 * and never a code that reads as "the server refused before acting".
 */
import { Code, ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runs } from "../support/fast-check-seed.js";
import { parseUnaryBody } from "../../services/shared/rpc/grpc-unary-client.js";
import { grpcFrame } from "../../services/shared/rpc/grpc-wire.js";

const MAX = 4096;

describe("parseUnaryBody", () => {
  it("returns the one message of a well-formed frame, byte for byte", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: MAX }), (payload) => {
        const out = parseUnaryBody(grpcFrame(payload), MAX);
        expect(out).toBeInstanceOf(Uint8Array);
        expect(Buffer.from(out as Uint8Array).equals(Buffer.from(payload))).toBe(true);
      }),
      { numRuns: runs(300) },
    );
  });

  it("never throws on any bytes, and fails only as internal or resource_exhausted", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.uint8Array({ maxLength: 64 }), (head, tail) => {
        const bytes = Buffer.concat([head, tail]);
        const out = parseUnaryBody(bytes, MAX);
        if (out instanceof ConnectError) expect([Code.Internal, Code.ResourceExhausted]).toContain(out.code);
        else if (out === undefined) expect(bytes.byteLength).toBe(0);
        else expect(bytes.byteLength).toBe(5 + out.byteLength);
      }),
      { numRuns: runs(2000) },
    );
  });

  it("refuses a truncated frame, a second message, a compressed frame and an oversized one", () => {
    const frame = grpcFrame(Buffer.from("hello"));
    expect((parseUnaryBody(frame.subarray(0, 7), MAX) as ConnectError).code).toBe(Code.Internal);
    expect((parseUnaryBody(frame.subarray(0, 3), MAX) as ConnectError).code).toBe(Code.Internal);
    expect((parseUnaryBody(Buffer.concat([frame, frame]), MAX) as ConnectError).code).toBe(Code.Internal);
    const compressed = Buffer.from(frame);
    compressed[0] = 1;
    expect((parseUnaryBody(compressed, MAX) as ConnectError).code).toBe(Code.Internal);
    expect((parseUnaryBody(grpcFrame(Buffer.alloc(100)), 99) as ConnectError).code).toBe(Code.ResourceExhausted);
    expect(parseUnaryBody(Buffer.alloc(0), MAX)).toBeUndefined();
  });
});
