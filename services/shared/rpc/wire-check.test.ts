import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AcquireRequestSchema } from "../gen/railfence/lock/v1/lock_pb.js";
import { SubmitPayoutRequestSchema } from "../gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { SetFaultsRequestSchema } from "../gen/railfence/railcontrol/v1/rail_control_pb.js";
import { checkWire, WireError } from "./wire-check.js";

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s/g, ""), "hex"));
const problemOf = (desc: Parameters<typeof checkWire>[0], bytes: Uint8Array) => {
  try {
    checkWire(desc, bytes);
    return "ok";
  } catch (e) {
    expect(e).toBeInstanceOf(WireError);
    return `${(e as WireError).problem}${(e as WireError).field ? `@${(e as WireError).field}` : ""}`;
  }
};
// {key: "k", owner: "o", ttl_ms: 0, wait_ms: 0} as written, then field 3 (ttl_ms) as fixed64.
const ACQUIRE_TTL_AS_FIXED64 = hex("0a016b 12016f 19 9d0ead4500000000");

describe("@bufbuild/protobuf's fromBinary (upstream behaviour this check exists for)", () => {
  it("reads a uint32 field sent as fixed64 as a varint out of the fixed64's bytes (the 1821 ms lease)", () => {
    // If this starts failing, upstream now treats the mismatch itself: revisit decision 008.
    expect(fromBinary(AcquireRequestSchema, ACQUIRE_TTL_AS_FIXED64).ttlMs).toBe(1821);
  });
});

describe("checkWire", () => {
  it("refuses a known field in the wrong wire type, naming it", () => {
    expect(problemOf(AcquireRequestSchema, ACQUIRE_TTL_AS_FIXED64)).toBe("wrong_wire_type@ttl_ms");
    expect(problemOf(AcquireRequestSchema, hex("0801"))).toBe("wrong_wire_type@key"); // string as varint
    expect(problemOf(SubmitPayoutRequestSchema, hex("2208 0900000000000000ff"))).toBe("wrong_wire_type@amount.amount_minor");
    expect(problemOf(SubmitPayoutRequestSchema, hex("2001"))).toBe("wrong_wire_type@amount"); // message as varint
    expect(problemOf(SetFaultsRequestSchema, hex("0a05 1500000000"))).toBe("wrong_wire_type@rules.latency_ms");
  });

  it("refuses values that do not fit their 32-bit field, varints past 64 bits, and fields overrunning their message", () => {
    expect(problemOf(AcquireRequestSchema, hex("18 8080808010"))).toBe("value_out_of_range@ttl_ms"); // 2^32
    expect(problemOf(AcquireRequestSchema, hex("18 ffffffff0f"))).toBe("ok"); // 2^32-1
    expect(problemOf(SubmitPayoutRequestSchema, hex("18 ffffffffffffffffff01"))).toBe("ok"); // 2^64-1
    expect(problemOf(SubmitPayoutRequestSchema, hex("18 ffffffffffffffffff02"))).toBe("value_out_of_range@fencing_token");
    expect(problemOf(SubmitPayoutRequestSchema, hex("18 ffffffffffffffffffff01"))).toBe("value_out_of_range@fencing_token");
    expect(problemOf(SetFaultsRequestSchema, hex("0a02 08ffffffffffffffffff01"))).toBe("truncated@rules.kind"); // kind runs past rules[0]
    expect(problemOf(SetFaultsRequestSchema, hex("0a0b 08ffffffffffffffffff01"))).toBe("ok"); // enum -1: a valid int32, sign-extended
    expect(problemOf(SetFaultsRequestSchema, hex("0a06 088080808010"))).toBe("value_out_of_range@rules.kind"); // 2^32 is no int32
  });

  it("refuses strings that are not UTF-8, bad tags and stray end-group tags", () => {
    expect(problemOf(AcquireRequestSchema, hex("0a02c328"))).toBe("invalid_utf8@key");
    expect(problemOf(AcquireRequestSchema, hex("00"))).toBe("bad_tag");
    expect(problemOf(AcquireRequestSchema, hex("0f"))).toBe("bad_tag"); // wire type 7
    expect(problemOf(AcquireRequestSchema, hex("ffffffff7f"))).toBe("bad_tag"); // tag past uint32
    expect(problemOf(AcquireRequestSchema, hex("0c"))).toBe("bad_group"); // end group without start
    expect(problemOf(AcquireRequestSchema, hex("0a05 6b"))).toBe("truncated@key");
  });

  it("skips unknown fields of every wire type, groups included, as protobuf requires", () => {
    // field 99: varint, fixed64, LEN, group { field 1 varint }, fixed32
    const unknown = hex("989f0601 999f060102030405060708 9a9f0602aabb 9b9f06 0801 9c9f06 9d9f0601020304");
    expect(problemOf(AcquireRequestSchema, unknown)).toBe("ok");
    expect(problemOf(AcquireRequestSchema, hex("9b9f06 0801 a49f06"))).toBe("bad_group"); // ends with field 100's end tag
  });

  it("accepts every message protobuf-es writes", () => {
    fc.assert(
      fc.property(
        fc.record({ key: fc.string({ unit: "binary" }), owner: fc.string(), ttlMs: fc.nat({ max: 2 ** 32 - 1 }), waitMs: fc.nat({ max: 2 ** 32 - 1 }) }),
        fc.record({
          accountId: fc.string(),
          payoutId: fc.string({ unit: "grapheme" }),
          fencingToken: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
          amount: fc.option(fc.record({ amountMinor: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), currency: fc.string() }), { nil: undefined }),
          fencingTokenSignature: fc.uint8Array({ maxLength: 40 }),
        }),
        fc.array(
          fc.record({
            kind: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
            latencyMs: fc.nat({ max: 2 ** 32 - 1 }),
            count: fc.nat({ max: 2 ** 32 - 1 }),
            clientReferencePrefix: fc.string(),
          }),
          { maxLength: 4 },
        ),
        (acquire, submit, rules) => {
          for (const [desc, init] of [
            [AcquireRequestSchema, acquire],
            [SubmitPayoutRequestSchema, submit],
            [SetFaultsRequestSchema, { rules }],
          ] as const) {
            const bytes = toBinary(desc, create(desc, init as never));
            expect(problemOf(desc, bytes)).toBe("ok");
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("never throws anything but a WireError, on any bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 120 }), (bytes) => {
        for (const desc of [AcquireRequestSchema, SubmitPayoutRequestSchema, SetFaultsRequestSchema]) problemOf(desc, bytes);
      }),
      { numRuns: 3000 },
    );
  });
});
