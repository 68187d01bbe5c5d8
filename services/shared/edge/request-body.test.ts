import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BodyCollector, encodeEnvelope } from "./request-body.js";
import { decompressMessage, encodingSupported } from "./request-decompress.js";

const frame = (flags: number, declared: number, payload: Uint8Array) => {
  const out = new Uint8Array(5 + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, declared);
  out.set(payload, 5);
  return out;
};

/** Feeds bytes to a collector in the given chunk sizes; the first problem, or the verdict at the end. */
function collect(c: BodyCollector, bytes: Uint8Array, cuts: number[]) {
  let at = 0;
  for (const n of [...cuts, bytes.length]) {
    const chunk = bytes.subarray(at, Math.min(bytes.length, at + Math.max(1, n)));
    if (chunk.length === 0) break;
    at += chunk.length;
    const p = c.push(chunk);
    if (p) return p;
  }
  return c.finish();
}

describe("BodyCollector", () => {
  it("an envelope is judged the same however the body is chunked", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 80 }),
        fc.integer({ min: -3, max: 3 }),
        fc.constantFrom(0, 1, 2, 0x80),
        fc.array(fc.nat({ max: 20 }), { maxLength: 10 }),
        (payload, delta, flags, cuts) => {
          const bytes = frame(flags, Math.max(0, payload.length + delta), payload);
          const plain = (r: ReturnType<typeof collect>) => ("payload" in r ? { ...r, payload: [...r.payload], body: [...r.body] } : r);
          expect(plain(collect(new BodyCollector(true, 64), bytes, cuts))).toEqual(plain(collect(new BodyCollector(true, 64), bytes, [])));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("knows a body is too large from its length prefix or its Content-Length, before reading it", () => {
    const c = new BodyCollector(true, 100);
    expect(c.push(frame(0, 101, new Uint8Array(0)))).toEqual({ kind: "too_large", declaredBytes: 101 });
    expect(new BodyCollector(false, 100, 101).early).toEqual({ kind: "too_large", declaredBytes: 101 });
    const plain = new BodyCollector(false, 100);
    expect(plain.push(new Uint8Array(100))).toBeUndefined();
    expect(plain.push(new Uint8Array(1))).toEqual({ kind: "too_large" });
  });

  it("names what is wrong with a finished envelope", () => {
    const judge = (bytes: Uint8Array) => collect(new BodyCollector(true, 64), bytes, []);
    expect(judge(new Uint8Array(0))).toEqual({ kind: "malformed", problem: "missing_message" });
    expect(judge(Uint8Array.from([0, 0]))).toEqual({ kind: "malformed", problem: "incomplete_envelope" });
    expect(judge(frame(0, 3, Uint8Array.from([1])))).toEqual({ kind: "malformed", problem: "incomplete_envelope" });
    expect(judge(frame(0, 1, Uint8Array.from([1, 2])))).toEqual({ kind: "malformed", problem: "extra_data" });
    expect(judge(frame(2, 1, Uint8Array.from([1])))).toEqual({ kind: "malformed", problem: "bad_flags" });
    expect(judge(frame(1, 1, Uint8Array.from([7])))).toMatchObject({ payload: Uint8Array.from([7]), compressed: true });
    expect(judge(encodeEnvelope(Uint8Array.from([9, 8])))).toMatchObject({
      payload: Uint8Array.from([9, 8]),
      compressed: false,
      body: encodeEnvelope(Uint8Array.from([9, 8])),
    });
  });
});

describe("decompressMessage", () => {
  it("inflates gzip within the limit and refuses a bomb as too large, corrupt data and a missing encoding as malformed", () => {
    const text = new TextEncoder().encode("x".repeat(1000));
    expect(decompressMessage(gzipSync(text), true, "gzip", 1000)).toEqual(Buffer.from(text));
    expect(decompressMessage(gzipSync(new Uint8Array(1_000_000)), true, "gzip", 1000)).toEqual({ kind: "too_large" });
    expect(decompressMessage(Uint8Array.from([1, 2, 3]), true, "gzip", 1000)).toEqual({ kind: "malformed", problem: "bad_compression" });
    expect(decompressMessage(text, true, undefined, 1000)).toEqual({ kind: "malformed", problem: "bad_flags" });
    expect(decompressMessage(text, false, "gzip", 1000)).toBe(text);
  });

  it("accepts the encodings connect-node accepts", () => {
    expect(["gzip", "br", "identity", undefined].map(encodingSupported)).toEqual([true, true, true, true]);
    expect(["lz4", "deflate", "GZIP", ""].map(encodingSupported)).toEqual([false, false, false, false]);
  });
});
