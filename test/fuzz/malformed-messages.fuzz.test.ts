/**
 * Messages a conforming client never sends, on every server, over gRPC and Connect (protobuf
 * and JSON), on the raw wire:
 *
 * - a known field in the wrong wire type (a uint32 sent as fixed64, an int64 amount as fixed64,
 *   a string as a varint, ...) is refused as MALFORMED_REQUEST naming the field: never read into
 *   a value and executed (before the fix, an Acquire with ttl_ms sent as fixed64 got a lease
 *   with ttl_ms = 1821);
 * - strings that are not UTF-8 (protobuf) and bodies that are not UTF-8 (JSON) are
 *   MALFORMED_REQUEST, never `internal` and never silently "repaired" with U+FFFD;
 * - unknown fields of any wire type are skipped, as protobuf requires: they change no answer;
 * - random bytes get a clean refusal: never `internal`, never decoder text.
 *
 * Nothing in paydb, raildb, lockdb or the fault plan changes, and every server stays SERVING.
 */
import { Code } from "@connectrpc/connect";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { expectNoLeak } from "./outcome.js";
import { grpcFrame, rawRequest, type RawAnswer } from "./raw-h2.js";
import { FuzzTally } from "./summary.js";
import { allowedWireTypes, concat, encodeAt, fieldPaths, lenField, tag, WIRE, wireTargets, type WireTarget } from "./wire-targets.js";
import { expectUnharmed, meshState, startWireMesh } from "./wire-mesh.js";
import { runs } from "../support/fast-check-seed.js";

let mesh: Mesh;
let before: Record<string, unknown>;
const tally = new FuzzTally("malformed-messages");
const TARGETS: WireTarget[] = wireTargets(() => mesh);
const targetArb = fc.constantFrom(...TARGETS);
const binaryProtoArb = fc.constantFrom("grpc", "connect-proto");

beforeAll(async () => {
  mesh = await startWireMesh();
  before = await meshState(mesh);
});

afterAll(async () => {
  await mesh?.stop();
  tally.write();
  expect(tally.total()).toBeGreaterThanOrEqual(300);
});

function send(t: WireTarget, proto: string, message: Uint8Array | string): Promise<RawAnswer> {
  const headers: Record<string, string> = { ...(t.headers() as Record<string, string>) };
  let body: Uint8Array | string = message;
  if (proto === "grpc") {
    headers["content-type"] = "application/grpc";
    headers.te = "trailers";
    body = grpcFrame(typeof message === "string" ? new TextEncoder().encode(message) : message);
  } else {
    headers["content-type"] = proto === "connect-json" ? "application/json" : "application/proto";
  }
  return rawRequest(t.url(), { path: t.path, headers, body, boundMs: 8000 });
}

function expectMalformed(a: RawAnswer, what: string, expected: { field?: string; problem?: string } = {}): string {
  const label = `${what}: status=${a.status} grpc=${a.grpcStatus} reason=${a.reason} meta=${JSON.stringify(a.metadata)} msg="${a.refusal?.rawMessage}"`;
  expect(a.hung, label).not.toBe(true);
  expect(a.refusal, `${label}: accepted`).toBeDefined();
  expect(Code[a.refusal!.code], label).toBe("InvalidArgument");
  expect(a.reason, label).toBe("MALFORMED_REQUEST");
  if (expected.field !== undefined) expect(a.metadata?.field, label).toBe(expected.field);
  if (expected.problem !== undefined) expect(a.metadata?.problem, label).toBe(expected.problem);
  return `MALFORMED_REQUEST/${a.metadata?.problem}`;
}

describe("wrong wire types", () => {
  it("regression: Acquire with ttl_ms sent as fixed64 (the 1821 ms lease) is refused naming ttl_ms, and no lease is granted", async () => {
    const lock = TARGETS.find((t) => t.name === "lock")!;
    // {key, owner, ttl_ms 0, wait_ms 0} followed by field 3 as fixed64: 19 9d0ead4500000000.
    const body = concat(
      lenField(1, new TextEncoder().encode("fz-wire/regression")),
      lenField(2, new TextEncoder().encode("executor")),
      Uint8Array.from([0x19, 0x9d, 0x0e, 0xad, 0x45, 0, 0, 0, 0]),
    );
    for (const proto of ["grpc", "connect-proto"]) {
      tally.record("wire-type/regression", expectMalformed(await send(lock, proto, body), `Acquire ${proto}`, { field: "ttl_ms", problem: "wrong_wire_type" }));
    }
  });

  it("a money or lease field in the wrong wire type is refused on each server before anything runs", async () => {
    const fixed64 = (fieldNo: number) => Uint8Array.from([...tag(fieldNo, WIRE.i64), 0x9d, 0x0e, 0xad, 0x45, 0, 0, 0, 0]);
    const cases: Record<WireTarget["name"], [string, Uint8Array]> = {
      "rail-proxy": ["fencing_token", fixed64(3)],
      payouts: ["amount.amount_minor", lenField(2, fixed64(1))],
      lock: ["ttl_ms", fixed64(3)],
      "rail-stub": ["amount.amount_minor", lenField(4, fixed64(1))],
      "rail-stub-control": ["rules.latency_ms", lenField(1, concat(Uint8Array.from([0x08, 0x01]), fixed64(2)))],
    };
    for (const t of TARGETS) {
      const [field, wrong] = cases[t.name];
      for (const proto of ["grpc", "connect-proto"]) {
        tally.record(
          "wire-type/per-server",
          expectMalformed(await send(t, proto, concat(t.valid(), wrong)), `${t.name} ${proto} ${field}`, { field, problem: "wrong_wire_type" }),
        );
      }
    }
  });

  it("any known field (top level or one message down) in any wire type protobuf does not allow is MALFORMED_REQUEST naming it", async () => {
    await fc.assert(
      fc.asyncProperty(
        targetArb.chain((t) => fc.tuple(fc.constant(t), fc.constantFrom(...fieldPaths(t.method.input)))),
        fc.constantFrom(WIRE.varint, WIRE.i64, WIRE.len, WIRE.sgroup, WIRE.i32),
        fc.uint8Array({ minLength: 0, maxLength: 12 }),
        binaryProtoArb,
        async ([t, fp], wireType, payload, proto) => {
          fc.pre(!allowedWireTypes(fp.field).includes(wireType));
          const body = concat(t.valid(), encodeAt(fp, wireType, payload));
          tally.record(
            "wire-type/any-field",
            expectMalformed(await send(t, proto, body), `${t.name} ${proto} ${fp.path} as wire type ${wireType}`, {
              field: fp.path,
              problem: "wrong_wire_type",
            }),
          );
        },
      ),
      { numRuns: runs(150) },
    );
  });

  it("unknown fields of any wire type are skipped: the answer is the one without them", async () => {
    await fc.assert(
      fc.asyncProperty(
        targetArb,
        fc.integer({ min: 50, max: 2000 }),
        fc.constantFrom(WIRE.varint, WIRE.i64, WIRE.len, WIRE.sgroup, WIRE.i32),
        fc.uint8Array({ maxLength: 12 }),
        binaryProtoArb,
        async (t, fieldNo, wireType, payload, proto) => {
          // Field 1 repeated empty: an invalid request on every server (a missing id or key, an empty fault rule).
          const invalid = concat(t.valid(), lenField(1, new Uint8Array(0)));
          const unknown = encodeAt({ path: "unknown", field: { number: fieldNo } as never }, wireType, payload);
          const [plain, padded] = [await send(t, proto, invalid), await send(t, proto, concat(unknown, invalid, unknown))];
          const what = `${t.name} ${proto} unknown field ${fieldNo} wire type ${wireType}`;
          expect(plain.reason, what).toMatch(/^FIELD_(REQUIRED|INVALID)$/);
          expect([padded.reason, padded.metadata?.field], what).toEqual([plain.reason, plain.metadata?.field]);
          tally.record("unknown-field/ignored", padded.reason!);
        },
      ),
      { numRuns: runs(60) },
    );
  });
});

/** Byte sequences that are not UTF-8: stray continuation, overlong, surrogate, past U+10FFFF, truncated, 0xFF. */
const notUtf8 = fc.constantFrom(
  [0x80],
  [0xc3, 0x28],
  [0xc0, 0x80],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe2, 0x82],
  [0xff],
  [0xfe, 0xff],
);

describe("text that is not UTF-8", () => {
  it("a protobuf string field carrying bytes that are not UTF-8 is MALFORMED_REQUEST naming the field", async () => {
    await fc.assert(
      fc.asyncProperty(
        targetArb.chain((t) =>
          fc.tuple(fc.constant(t), fc.constantFrom(...fieldPaths(t.method.input).filter((p) => p.field.fieldKind === "scalar" && p.field.scalar === 9))),
        ),
        fc.string({ unit: "binary-ascii", maxLength: 10 }),
        notUtf8,
        binaryProtoArb,
        async ([t, fp], prefix, bad, proto) => {
          const text = concat(new TextEncoder().encode(prefix), Uint8Array.from(bad));
          const body = concat(t.valid(), encodeAt(fp, WIRE.len, text));
          tally.record(
            "utf8/protobuf",
            expectMalformed(await send(t, proto, body), `${t.name} ${proto} ${fp.path}=${Buffer.from(text).toString("hex")}`, {
              field: fp.path,
              problem: "invalid_utf8",
            }),
          );
        },
      ),
      { numRuns: runs(80) },
    );
  });

  it("a Connect JSON body that is not UTF-8 is MALFORMED_REQUEST, not read with U+FFFD in place of the bytes", async () => {
    await fc.assert(
      fc.asyncProperty(targetArb, notUtf8, async (t, bad) => {
        const json = t.validJson();
        // Inside the first string value: {"accountId":"acc<bad>...
        const at = json.indexOf('":"') + 3;
        const body = concat(new TextEncoder().encode(json.slice(0, at)), Uint8Array.from(bad), new TextEncoder().encode(json.slice(at)));
        const a = await rawRequest(t.url(), {
          path: t.path,
          headers: { "content-type": "application/json", ...(t.headers() as Record<string, string>) },
          body,
          boundMs: 8000,
        });
        tally.record("utf8/json", expectMalformed(a, `${t.name} json with ${Buffer.from(bad).toString("hex")}`, { problem: "invalid_utf8" }));
      }),
      { numRuns: runs(40) },
    );
  });

  it("a JSON string with a lone surrogate escape (no UTF-8 form) is MALFORMED_REQUEST", async () => {
    for (const t of TARGETS) {
      const json = t.validJson();
      const at = json.indexOf('":"') + 3;
      const a = await rawRequest(t.url(), {
        path: t.path,
        headers: { "content-type": "application/json", ...(t.headers() as Record<string, string>) },
        body: `${json.slice(0, at)}\\ud800${json.slice(at)}`,
        boundMs: 8000,
      });
      tally.record("utf8/lone-surrogate", expectMalformed(a, `${t.name} lone surrogate`, { problem: "invalid_utf8" }));
    }
  });
});

describe("random bytes", () => {
  it("any bytes as a protobuf message: decoded and judged by the handler, or MALFORMED_REQUEST; never internal, never decoder text", async () => {
    await fc.assert(
      // Not the control API: a random message that happens to be a valid fault plan would legitimately change it.
      fc.asyncProperty(
        fc.constantFrom(...TARGETS.filter((t) => t.name !== "rail-stub-control")),
        fc.uint8Array({ maxLength: 200 }),
        binaryProtoArb,
        async (t, bytes, proto) => {
          const a = await send(t, proto, bytes);
          const what = `${t.name} ${proto} ${Buffer.from(bytes).toString("hex").slice(0, 80)}`;
          expect(a.hung, what).not.toBe(true);
          if (!a.refusal) return void tally.record("random/protobuf", "ok");
          expect(Code[a.refusal.code], `${what}: ${a.refusal.rawMessage}`).not.toBe("Internal");
          expect(a.reason, `${what}: no ErrorInfo`).toMatch(/^[A-Z][A-Z0-9_]*$/);
          expect(errorInfo(a.refusal)?.domain).toBe("railfence.dev");
          expect(a.refusal.rawMessage, what).not.toMatch(/premature EOF|illegal tag|invalid end group|cant skip|cannot decode|parse binary|encoded data/);
          expectNoLeak(a.refusal.rawMessage, what);
          tally.record("random/protobuf", a.reason!);
        },
      ),
      { numRuns: runs(200) },
    );
  });
});

describe("a plain @grpc/grpc-js client", () => {
  it("sending a field in the wrong wire type reads INVALID_ARGUMENT + MALFORMED_REQUEST naming it from grpc-status-details-bin", async () => {
    const grpc = await import("@grpc/grpc-js");
    const { fromBinary } = await import("@bufbuild/protobuf");
    const { anyUnpack } = await import("@bufbuild/protobuf/wkt");
    const { StatusSchema } = await import("../../services/shared/gen/google/rpc/status_pb.js");
    const { ErrorInfoSchema } = await import("../../services/shared/gen/google/rpc/error_details_pb.js");
    const lock = TARGETS.find((t) => t.name === "lock")!;
    const client = new grpc.Client(lock.url().replace("http://", ""), grpc.credentials.createInsecure());
    try {
      const body = Buffer.from(concat(lock.valid(), Uint8Array.from([0x19, 0x9d, 0x0e, 0xad, 0x45, 0, 0, 0, 0])));
      const err = await new Promise<import("@grpc/grpc-js").ServiceError>((resolve, reject) => {
        client.makeUnaryRequest(
          lock.path,
          (b: Buffer) => b,
          (b: Buffer) => b,
          body,
          (e) => (e ? resolve(e) : reject(new Error("a lease was granted"))),
        );
      });
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      const status = fromBinary(StatusSchema, err.metadata.get("grpc-status-details-bin")[0] as Buffer);
      const info = status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).find(Boolean);
      expect(info).toMatchObject({ reason: "MALFORMED_REQUEST", domain: "railfence.dev", metadata: { field: "ttl_ms", problem: "wrong_wire_type" } });
      tally.record("grpc-js/wire-type", "MALFORMED_REQUEST");
    } finally {
      client.close();
    }
  });
});

describe("after the malformed messages", () => {
  it("every server is SERVING, nothing reached paydb, raildb, lockdb or the fault plan, and nothing was logged as an error", async () => {
    await expectUnharmed(mesh, TARGETS, before);
  });
});
