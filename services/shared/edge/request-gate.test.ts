import { PassThrough } from "node:stream";
import { Code } from "@connectrpc/connect";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { errorInfo } from "../domain/errors.js";
import { AcquireRequestSchema, LockService } from "../gen/railfence/lock/v1/lock_pb.js";
import { admitRequest, type GateOutcome } from "./request-gate.js";
import { encodeEnvelope } from "./request-body.js";

const limits = { maxMessageBytes: 64, readTimeoutMs: 300, maxTimeoutMs: 120_000 };
const acquire = LockService.method.acquire;
const GRPC = { ":method": "POST", "content-type": "application/grpc" };
const message = toBinary(AcquireRequestSchema, create(AcquireRequestSchema, { key: "k", owner: "o", ttlMs: 1000 }));

function refused(o: GateOutcome) {
  if (!("refused" in o)) throw new Error(`expected a refusal, got ${JSON.stringify(Object.keys(o))}`);
  return { code: Code[o.refused.error.code], reason: errorInfo(o.refused.error)?.reason, metadata: { ...errorInfo(o.refused.error)?.metadata } };
}

describe("admitRequest (on a plain stream, as any server stack would call it)", () => {
  it("admits one well-formed envelope and reports the client's remaining deadline", async () => {
    const body = new PassThrough();
    const outcome = admitRequest(body, { ...GRPC, "grpc-timeout": "5S" }, acquire, limits);
    body.end(encodeEnvelope(message));
    const o = await outcome;
    expect("admitted" in o && [...o.admitted.body]).toEqual([...encodeEnvelope(message)]);
    expect("admitted" in o && o.admitted.remainingMs).toBeGreaterThan(4000);
  });

  it("a stalled body: deadline_exceeded at the client's deadline when shorter, else at the read timeout", async () => {
    for (const [headers, bound] of [
      [{ ...GRPC, "grpc-timeout": "100m" }, "client_deadline"],
      [GRPC, "server_read_timeout"],
      [{ ...GRPC, "grpc-timeout": "20S" }, "server_read_timeout"],
    ] as const) {
      const body = new PassThrough();
      body.write(encodeEnvelope(message).subarray(0, 7));
      const started = performance.now();
      const o = refused(await admitRequest(body, headers, acquire, limits));
      expect(o).toMatchObject({ code: "DeadlineExceeded", reason: "REQUEST_READ_TIMEOUT", metadata: { bound } });
      expect(performance.now() - started).toBeGreaterThanOrEqual(bound === "client_deadline" ? 95 : 295);
    }
  });

  it("a trickle does not extend the deadline", async () => {
    const body = new PassThrough();
    body.write(Uint8Array.from([0, 0, 0, 0, 60]));
    const tick = setInterval(() => body.write(Uint8Array.from([0x20])), 20);
    try {
      expect(refused(await admitRequest(body, GRPC, acquire, limits)).reason).toBe("REQUEST_READ_TIMEOUT");
    } finally {
      clearInterval(tick);
    }
  });

  it("refuses a length prefix past the limit at once, without waiting for the body", async () => {
    const body = new PassThrough();
    const outcome = admitRequest(body, GRPC, acquire, limits);
    body.write(Uint8Array.from([0, 0, 0, 1, 0]));
    expect(refused(await outcome)).toMatchObject({ code: "InvalidArgument", reason: "REQUEST_TOO_LARGE" });
  });

  it("refuses malformed messages and headers before any handler", async () => {
    const run = async (headers: Record<string, string>, bytes: Uint8Array) => {
      const body = new PassThrough();
      const outcome = admitRequest(body, headers, acquire, limits);
      body.end(bytes);
      return refused(await outcome);
    };
    expect(await run(GRPC, encodeEnvelope(Uint8Array.from([0x19, 1, 2, 3, 4, 5, 6, 7, 8])))).toMatchObject({
      reason: "MALFORMED_REQUEST",
      metadata: { field: "ttl_ms", problem: "wrong_wire_type" },
    });
    expect(await run({ ...GRPC, "grpc-timeout": "1 second" }, encodeEnvelope(message))).toMatchObject({
      reason: "MALFORMED_REQUEST",
      metadata: { field: "grpc-timeout" },
    });
    expect(await run({ ...GRPC, "grpc-encoding": "snappy" }, encodeEnvelope(message))).toMatchObject({
      code: "Unimplemented",
      reason: "COMPRESSION_UNSUPPORTED",
    });
    expect(await run({ ":method": "POST", "content-type": "text/xml" }, message)).toMatchObject({ code: "Unimplemented", reason: "UNSUPPORTED_CONTENT_TYPE" });
    expect(await run({ ":method": "POST", "content-type": "application/json" }, new TextEncoder().encode('{"key":1}'))).toMatchObject({
      reason: "MALFORMED_REQUEST",
      metadata: { field: "key" },
    });
  });

  it("says the client is gone when its stream closes before the body is complete", async () => {
    const body = new PassThrough();
    const outcome = admitRequest(body, GRPC, acquire, limits);
    body.write(Uint8Array.from([0, 0]));
    body.destroy();
    expect(await outcome).toEqual({ gone: true });
  });
});
