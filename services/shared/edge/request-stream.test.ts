import { create, toBinary } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { errorInfo } from "../domain/errors.js";
import { ServerReflectionRequestSchema } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { encodeEnvelope } from "./request-body.js";
import { checkedRequestStream } from "./request-stream.js";

const check = { input: ServerReflectionRequestSchema, binary: true, encoding: undefined, maxMessageBytes: 64 };
const good = encodeEnvelope(
  toBinary(ServerReflectionRequestSchema, create(ServerReflectionRequestSchema, { messageRequest: { case: "listServices", value: "" } })),
);

async function* chunks(...parts: Uint8Array[]) {
  yield* parts;
}

/** The bytes passed on, or the refusal's reason and problem. */
async function run(...parts: Uint8Array[]) {
  const out: number[] = [];
  try {
    for await (const e of checkedRequestStream(chunks(...parts), check)) out.push(...e);
    return { passed: out.length };
  } catch (err) {
    const ce = err as ConnectError;
    return { passed: out.length, reason: errorInfo(ce)?.reason, problem: errorInfo(ce)?.metadata.problem };
  }
}

describe("checkedRequestStream", () => {
  it("passes well-formed envelopes on unchanged, however the chunks split them", async () => {
    const two = Buffer.concat([good, good]);
    expect(await run(two)).toEqual({ passed: two.byteLength });
    expect(await run(two.subarray(0, 3), two.subarray(3, 9), two.subarray(9))).toEqual({ passed: two.byteLength });
  });

  it("refuses a malformed message after passing the good ones before it", async () => {
    expect(await run(good, encodeEnvelope(Uint8Array.from([0x0a, 0x05, 0x61])))).toEqual({
      passed: good.byteLength,
      reason: "MALFORMED_REQUEST",
      problem: "truncated",
    });
  });

  it("refuses a cut envelope, unknown flags and a message past the limit", async () => {
    expect(await run(good.subarray(0, good.byteLength - 1))).toMatchObject({ reason: "MALFORMED_REQUEST", problem: "incomplete_envelope" });
    expect(await run(Uint8Array.from([0x04, ...good.subarray(1)]))).toMatchObject({ reason: "MALFORMED_REQUEST", problem: "bad_flags" });
    expect(await run(Uint8Array.from([0, 0, 0, 1, 0]))).toMatchObject({ passed: 0, reason: "REQUEST_TOO_LARGE" });
  });
});
