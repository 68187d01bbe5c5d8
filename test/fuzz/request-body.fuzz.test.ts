/**
 * Hostile request bodies on the raw wire, against every server (rail-proxy, payouts, lock,
 * rail-stub and its control API) over gRPC, gRPC-Web, Connect JSON and Connect protobuf:
 *
 * - stalled and trickling bodies get deadline_exceeded (REQUEST_READ_TIMEOUT) at the client's
 *   deadline or the server's read timeout, whichever is first, and the server closes the stream
 *   although the client never finishes sending;
 * - oversized envelopes and bodies get invalid_argument (REQUEST_TOO_LARGE) at the first bytes
 *   that prove it, and the stream is reset; the documented limit itself is accepted;
 * - truncated envelopes, extra envelopes and broken JSON get invalid_argument MALFORMED_REQUEST;
 * - every refusal a framework makes (unknown method, content type, timeout header, encoding)
 *   carries an ErrorInfo reason.
 *
 * Black box: raw node:http2, @grpc/grpc-js and Connect clients only, so the same file runs
 * unchanged against any server stack.
 */
import { Code } from "@connectrpc/connect";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { ClientPool } from "./fuzz-clients.js";
import { grpcFrame, rawRequest, type RawAnswer } from "./raw-h2.js";
import { FuzzTally } from "./summary.js";
import { concat, lenField, wireTargets, type WireTarget } from "./wire-targets.js";
import { expectUnharmed, meshState, SERVER_READ_TIMEOUT_MS, startWireMesh } from "./wire-mesh.js";
import { runs } from "../support/fast-check-seed.js";

let mesh: Mesh;
let before: Record<string, unknown>;
const tally = new FuzzTally("request-body");
const TARGETS: WireTarget[] = wireTargets(() => mesh);
const targetArb = fc.constantFrom(...TARGETS);
/** Scheduling slack on a shared 2-core machine; the defect this guards against took ~95 s. */
const SLACK_MS = 2500;

type Proto = "grpc" | "grpc-web" | "connect-json" | "connect-proto";
const protoArb = fc.constantFrom<Proto>("grpc", "grpc-web", "connect-json", "connect-proto");
const enveloped = (p: Proto) => p === "grpc" || p === "grpc-web";

const CONTENT_TYPE: Record<Proto, string> = {
  grpc: "application/grpc",
  "grpc-web": "application/grpc-web+proto",
  "connect-json": "application/json",
  "connect-proto": "application/proto",
};

function headersFor(t: WireTarget, p: Proto, deadlineMs?: number) {
  const h: Record<string, string> = { "content-type": CONTENT_TYPE[p], ...(t.headers() as Record<string, string>) };
  if (p === "grpc") h.te = "trailers";
  if (deadlineMs !== undefined) h[enveloped(p) ? "grpc-timeout" : "connect-timeout-ms"] = enveloped(p) ? `${deadlineMs}m` : String(deadlineMs);
  return h;
}

/** The body a well-behaved client would send for t over p. */
function fullBody(t: WireTarget, p: Proto): Uint8Array {
  if (p === "connect-json") return new TextEncoder().encode(t.validJson());
  return enveloped(p) ? grpcFrame(t.valid()) : t.valid();
}

/** Asserts a refusal with this code and reason, and returns a tally label. */
function expectRefusal(a: RawAnswer, code: Code, reason: string, what: string): string {
  const label = `${what}: status=${a.status} grpc=${a.grpcStatus} reason=${a.reason} hung=${a.hung} open=${a.stillOpen} answered=${a.answeredMs?.toFixed(0)} closed=${a.closedMs?.toFixed(0)}`;
  expect(a.hung, label).not.toBe(true);
  expect(a.refusal, label).toBeDefined();
  expect(Code[a.refusal!.code], label).toBe(Code[code]);
  expect(a.reason, label).toBe(reason);
  expect(errorInfo(a.refusal)?.domain, label).toBe("railfence.dev");
  return `${Code[code]}/${reason}`;
}

beforeAll(async () => {
  mesh = await startWireMesh();
  before = await meshState(mesh);
});

afterAll(async () => {
  await mesh?.stop();
  tally.write();
});

describe("stalled bodies", () => {
  const stallCase = fc.record({
    target: targetArb,
    proto: protoArb,
    /** Fraction of the body sent before the client stalls. */
    cut: fc.double({ min: 0, max: 0.95, noNaN: true }),
    /** The client's deadline, or none (the server's read timeout applies). */
    deadlineMs: fc.option(fc.integer({ min: 150, max: 2500 }), { nil: undefined }),
    /** Keep sending a byte every 100 ms instead of going silent (an idle timer would never fire). */
    trickle: fc.boolean(),
  });

  it("a body that never completes gets deadline_exceeded at min(client deadline, server read timeout), and the server closes the stream", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stallCase, { minLength: 8, maxLength: 12 }), async (cases) => {
        await Promise.all(
          cases.map(async ({ target: t, proto, cut, deadlineMs, trickle }) => {
            const expected = Math.min(deadlineMs ?? Infinity, SERVER_READ_TIMEOUT_MS);
            let body = fullBody(t, proto);
            // A trickle must never complete the body: promise a long envelope, or never end a Connect body.
            if (trickle && enveloped(proto)) body = grpcFrame(t.valid(), { declaredLength: Math.min(t.maxBytes, 4000) });
            // A trickled envelope keeps its header, or the trickled bytes would become a length prefix.
            const keep = trickle && enveloped(proto) ? 5 : 0;
            body = body.subarray(0, keep + Math.floor((body.length - keep) * cut));
            const a = await rawRequest(t.url(), {
              path: t.path,
              headers: headersFor(t, proto, deadlineMs),
              body,
              keepOpen: true,
              trickle: trickle ? { byte: 0x20, tickMs: 100 } : undefined,
              boundMs: expected + SLACK_MS + 2000,
            });
            const what = `${t.name} ${proto} cut=${cut.toFixed(2)} deadline=${deadlineMs} trickle=${trickle}`;
            tally.record("stalled/deadline", expectRefusal(a, Code.DeadlineExceeded, "REQUEST_READ_TIMEOUT", what));
            expect(a.answeredMs!, `${what}: answered before its deadline`).toBeGreaterThanOrEqual(expected - 50);
            expect(a.answeredMs!, `${what}: answered ${a.answeredMs} ms, deadline ${expected} ms`).toBeLessThanOrEqual(expected + SLACK_MS);
            expect(a.stillOpen, `${what}: the server left the stream open`).not.toBe(true);
          }),
        );
      }),
      { numRuns: runs(4) },
    );
  });

  it("the read timeout bounds the body only: a complete request with a long deadline is served normally", async () => {
    const pool = new ClientPool();
    try {
      const payouts = pool.client(PayoutService, mesh.payouts!.url, "grpc", { timeoutMs: 20_000 });
      // Invalid on purpose (changes nothing), but it reaches the handler and its validation.
      const err = await payouts.getPayout({ payoutId: "" }).catch((e: unknown) => e);
      expect(errorInfo(err)?.reason).toBe("FIELD_REQUIRED");
    } finally {
      pool.close();
    }
  });
});

describe("oversized envelopes and bodies", () => {
  it("a message past the limit is invalid_argument REQUEST_TOO_LARGE at once, and the stream is reset while the client still sends", async () => {
    await fc.assert(
      fc.asyncProperty(targetArb, protoArb, fc.integer({ min: 1, max: 100_000 }), fc.boolean(), async (t, proto, excess, claimOnly) => {
        let body: Uint8Array;
        if (enveloped(proto)) {
          // Either a prefix that merely claims the size, or the bytes themselves (in part).
          body = claimOnly ? grpcFrame(new Uint8Array(3), { declaredLength: t.maxBytes + excess }) : grpcFrame(new Uint8Array(t.maxBytes + excess));
        } else {
          body = new Uint8Array(t.maxBytes + Math.min(excess, 20_000)).fill(0x20);
        }
        const a = await rawRequest(t.url(), { path: t.path, headers: headersFor(t, proto), body, keepOpen: true, boundMs: 8000 });
        const what = `${t.name} ${proto} limit=${t.maxBytes} excess=${excess} claimOnly=${claimOnly}`;
        tally.record("oversized/refused", expectRefusal(a, Code.InvalidArgument, "REQUEST_TOO_LARGE", what));
        expect(a.stillOpen, `${what}: the server left the stream open`).not.toBe(true);
      }),
      { numRuns: runs(40) },
    );
  });

  it("every server accepts a message of exactly its documented limit and refuses one byte more (README Limits table)", async () => {
    for (const t of TARGETS) {
      for (const proto of ["grpc", "connect-proto", "connect-json"] as const) {
        for (const extra of [0, 1]) {
          const size = t.maxBytes + extra;
          let message: Uint8Array;
          if (proto === "connect-json") {
            message = new TextEncoder().encode(`{"zzUnknown":"${"x".repeat(size - 16)}"}`);
          } else {
            // An unknown field (number 99) padding the message to size: a parser skips it, so only the size matters.
            const overhead = lenField(99, new Uint8Array(size - 4)).length - (size - 4);
            message = lenField(99, new Uint8Array(size - overhead));
          }
          expect(message.length).toBe(size);
          const body = proto === "grpc" ? grpcFrame(message) : message;
          const a = await rawRequest(t.url(), { path: t.path, headers: headersFor(t, proto), body, boundMs: 8000 });
          const what = `${t.name} ${proto} message of ${size} bytes (limit ${t.maxBytes})`;
          expect(a.hung, what).not.toBe(true);
          if (extra === 0) {
            expect(a.reason, what).not.toBe("REQUEST_TOO_LARGE");
            expect(a.refusal?.code, what).not.toBe(Code.Internal);
            tally.record("limit/exact", a.reason ?? "ok");
          } else {
            tally.record("limit/exceeded", expectRefusal(a, Code.InvalidArgument, "REQUEST_TOO_LARGE", what));
          }
        }
      }
    }
  });
});

describe("truncated and extra envelopes", () => {
  it("an envelope cut short (then end of stream) is MALFORMED_REQUEST, never a hang or internal", async () => {
    await fc.assert(
      fc.asyncProperty(targetArb, fc.constantFrom<Proto>("grpc", "grpc-web"), fc.double({ min: 0.01, max: 0.99, noNaN: true }), async (t, proto, cut) => {
        const full = grpcFrame(t.valid());
        const n = Math.max(1, Math.floor(full.length * cut));
        const a = await rawRequest(t.url(), { path: t.path, headers: headersFor(t, proto), body: full.subarray(0, n), boundMs: 8000 });
        const what = `${t.name} ${proto} ${n}/${full.length} bytes`;
        tally.record("truncated/envelope", expectRefusal(a, Code.InvalidArgument, "MALFORMED_REQUEST", what));
        expect(a.metadata?.problem, what).toBe("incomplete_envelope");
      }),
      { numRuns: runs(40) },
    );
  });

  it("a second envelope, or bytes after the first, is MALFORMED_REQUEST; so is an empty body on gRPC", async () => {
    await fc.assert(
      fc.asyncProperty(
        targetArb,
        fc.constantFrom<Proto>("grpc", "grpc-web"),
        fc.uint8Array({ minLength: 1, maxLength: 40 }),
        fc.boolean(),
        async (t, proto, junk, envelope) => {
          const tail = envelope ? grpcFrame(junk) : junk;
          const a = await rawRequest(t.url(), { path: t.path, headers: headersFor(t, proto), body: concat(grpcFrame(t.valid()), tail), boundMs: 8000 });
          tally.record("extra/envelope", expectRefusal(a, Code.InvalidArgument, "MALFORMED_REQUEST", `${t.name} ${proto} +${tail.length} bytes`));
        },
      ),
      { numRuns: runs(30) },
    );
    for (const t of TARGETS) {
      const a = await rawRequest(t.url(), { path: t.path, headers: headersFor(t, "grpc"), body: new Uint8Array(0), boundMs: 8000 });
      tally.record("extra/empty", expectRefusal(a, Code.InvalidArgument, "MALFORMED_REQUEST", `${t.name} empty gRPC body`));
    }
  });

  it("JSON cut short or not JSON at all is MALFORMED_REQUEST (no parser text in the message)", async () => {
    await fc.assert(
      fc.asyncProperty(targetArb, fc.double({ min: 0, max: 0.99, noNaN: true }), async (t, cut) => {
        const json = t.validJson();
        const body = json.slice(0, Math.floor(json.length * cut));
        const a = await rawRequest(t.url(), { path: t.path, headers: headersFor(t, "connect-json"), body, boundMs: 8000 });
        tally.record("truncated/json", expectRefusal(a, Code.InvalidArgument, "MALFORMED_REQUEST", `${t.name} json ${JSON.stringify(body.slice(0, 60))}`));
        expect(a.refusal!.rawMessage).not.toMatch(/JSON|Unexpected|position|token/);
      }),
      { numRuns: runs(30) },
    );
  });
});

describe("refusals before any handler", () => {
  const cases: { what: string; path?: string; headers: Record<string, string>; code: Code; reason: string; method?: string }[] = [
    {
      what: "unknown method (gRPC)",
      path: "/railfence.nope.v1.Nope/Drop",
      headers: { "content-type": "application/grpc", te: "trailers" },
      code: Code.Unimplemented,
      reason: "METHOD_NOT_FOUND",
    },
    {
      what: "unknown method (Connect)",
      path: "/railfence.nope.v1.Nope/Drop",
      headers: { "content-type": "application/json" },
      code: Code.Unimplemented,
      reason: "METHOD_NOT_FOUND",
    },
    { what: "unsupported content type", headers: { "content-type": "text/plain" }, code: Code.Unimplemented, reason: "UNSUPPORTED_CONTENT_TYPE" },
    { what: "gRPC-Web text", headers: { "content-type": "application/grpc-web-text" }, code: Code.Unimplemented, reason: "UNSUPPORTED_CONTENT_TYPE" },
    { what: "GET", method: "GET", headers: { "content-type": "application/json" }, code: Code.Unimplemented, reason: "METHOD_NOT_ALLOWED" },
    {
      what: "malformed grpc-timeout",
      headers: { "content-type": "application/grpc", te: "trailers", "grpc-timeout": "soon" },
      code: Code.InvalidArgument,
      reason: "MALFORMED_REQUEST",
    },
    {
      what: "malformed connect-timeout-ms",
      headers: { "content-type": "application/json", "connect-timeout-ms": "-1" },
      code: Code.InvalidArgument,
      reason: "MALFORMED_REQUEST",
    },
    {
      what: "grpc-timeout past 120 s",
      headers: { "content-type": "application/grpc", te: "trailers", "grpc-timeout": "3H" },
      code: Code.InvalidArgument,
      reason: "TIMEOUT_TOO_LONG",
    },
    {
      what: "unknown grpc-encoding",
      headers: { "content-type": "application/grpc", te: "trailers", "grpc-encoding": "lz4" },
      code: Code.Unimplemented,
      reason: "COMPRESSION_UNSUPPORTED",
    },
    {
      what: "compressed frame without an encoding",
      headers: { "content-type": "application/grpc", te: "trailers" },
      code: Code.InvalidArgument,
      reason: "MALFORMED_REQUEST",
    },
  ];

  it("each carries an ErrorInfo reason on every server, and the stream is closed although the client keeps it open", async () => {
    for (const t of TARGETS) {
      for (const c of cases) {
        const compressedFlag = c.what.startsWith("compressed");
        const body = c.headers["content-type"]!.startsWith("application/grpc") ? grpcFrame(t.valid(), { flags: compressedFlag ? 1 : 0 }) : t.validJson();
        const a = await rawRequest(t.url(), {
          path: c.path ?? t.path,
          headers: { ...c.headers, ...(c.method ? { ":method": c.method } : {}) },
          body: c.method === "GET" ? undefined : body,
          keepOpen: !compressedFlag && c.method !== "GET",
          boundMs: 6000,
        });
        const what = `${t.name}: ${c.what}`;
        tally.record("framework/refusal", expectRefusal(a, c.code, c.reason, what));
        expect(a.stillOpen, `${what}: the server left the stream open`).not.toBe(true);
      }
    }
  });
});

describe("real clients see the same refusals", () => {
  it("a plain @grpc/grpc-js client reads INVALID_ARGUMENT + REQUEST_TOO_LARGE for an oversized message (the reset does not turn it into INTERNAL)", async () => {
    const grpc = await import("@grpc/grpc-js");
    const { fromBinary } = await import("@bufbuild/protobuf");
    const { anyUnpack } = await import("@bufbuild/protobuf/wkt");
    const { StatusSchema } = await import("../../services/shared/gen/google/rpc/status_pb.js");
    const { ErrorInfoSchema } = await import("../../services/shared/gen/google/rpc/error_details_pb.js");
    for (const t of TARGETS) {
      const client = new grpc.Client(t.url().replace("http://", ""), grpc.credentials.createInsecure());
      try {
        const err = await new Promise<import("@grpc/grpc-js").ServiceError>((resolve, reject) => {
          const metadata = new grpc.Metadata();
          for (const [k, v] of Object.entries(t.headers())) metadata.set(k, String(v));
          client.makeUnaryRequest(
            t.path,
            (b: Buffer) => b,
            (b: Buffer) => b,
            Buffer.alloc(t.maxBytes * 3, 0x41),
            metadata,
            (e) => (e ? resolve(e) : reject(new Error("accepted"))),
          );
        });
        expect(err.code, `${t.name}: ${err.details}`).toBe(grpc.status.INVALID_ARGUMENT);
        const status = fromBinary(StatusSchema, err.metadata.get("grpc-status-details-bin")[0] as Buffer);
        const info = status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).find(Boolean);
        expect(info?.reason, t.name).toBe("REQUEST_TOO_LARGE");
        tally.record("grpc-js/oversized", "REQUEST_TOO_LARGE");
      } finally {
        client.close();
      }
    }
  });

  it("Connect clients (gRPC and Connect JSON) read REQUEST_TOO_LARGE with its ErrorInfo", async () => {
    const pool = new ClientPool();
    try {
      for (const protocol of ["grpc", "connect-json"] as const) {
        const payouts = pool.client(PayoutService, mesh.payouts!.url, protocol);
        const big = { accountId: "acc-big", amount: { amountMinor: 1n, currency: "EUR" }, beneficiary: "ben", clientReference: "x".repeat(20_000) };
        const err = await payouts.createPayout(big, { headers: { "idempotency-key": `big-${protocol}` } }).catch((e: unknown) => e);
        expect(errorInfo(err)?.reason, protocol).toBe("REQUEST_TOO_LARGE");
        tally.record("connect-client/oversized", "REQUEST_TOO_LARGE");
      }
    } finally {
      pool.close();
    }
  });
});

describe("after the hostile bodies", () => {
  it("every server is SERVING, nothing reached paydb, raildb, lockdb or the fault plan, and nothing was logged as an error", async () => {
    await expectUnharmed(mesh, TARGETS, before);
  });
});
