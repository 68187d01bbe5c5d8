/**
 * Hostile input below the message level, with raw node:http2 against every service port:
 * truncated and lying gRPC length prefixes, random bytes, wrong JSON types and unknown fields,
 * numbers past 2^64, oversized bodies, garbage content types and timeouts, unknown methods,
 * slowloris clients and hundreds of concurrent streams on one connection. Every request gets a
 * bounded, clean answer (or a stream reset), never `internal`/`unknown`, and every refusal
 * carries an ErrorInfo reason (framework refusals included); every server stays SERVING, and
 * nothing reaches paydb, the rail ledger or lockdb. Stalled, truncated and oversized bodies and
 * malformed messages have their own suites (request-body, malformed-messages).
 */
import fc from "fast-check";
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { checkInvariants, meshCheckTarget } from "../../tools/harness/invariants.js";
import { testMesh } from "../support/test-mesh.js";
import { expectServing } from "./fuzz-clients.js";
import { expectNoLeak } from "./outcome.js";
import { CONNECT_JSON_HEADERS, GRPC_HEADERS, grpcFrame, rawRequest, slowStream, type RawAnswer } from "./raw-h2.js";
import { lockdbState, paydbState, raildbState } from "./state.js";
import { FuzzTally } from "./summary.js";
import { documentedRequestLimits } from "./wire-targets.js";
import { runs } from "../support/fast-check-seed.js";

/** gRPC status codes a hostile request may legitimately get. */
const CLEAN_GRPC = new Set([1, 3, 4, 5, 6, 8, 9, 10, 12, 16]); // canceled, invalid_argument, deadline, not_found, already_exists, resource_exhausted, failed_precondition, aborted, unimplemented, unauthenticated
const CLEAN_CONNECT = new Set([
  "canceled",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "unimplemented",
  "unauthenticated",
]);

let mesh: Mesh;
const tally = new FuzzTally("wire");

interface Target {
  name: string;
  url: () => string;
  /** One unary method (the money path where there is one). */
  path: string;
  readMaxBytes: number;
}
// Size limits as documented (docs/limits.md), so the documentation is what gets tested.
const LIMITS = documentedRequestLimits();
const TARGETS: Target[] = [
  { name: "rail-proxy", url: () => mesh.proxies[0]!.url, path: "/railfence.railproxy.v1.RailProxyService/SubmitPayout", readMaxBytes: LIMITS["rail-proxy"]! },
  { name: "payouts", url: () => mesh.payouts!.url, path: "/railfence.payouts.v1.PayoutService/CreatePayout", readMaxBytes: LIMITS.payouts! },
  { name: "lock", url: () => mesh.lock!.url, path: "/railfence.lock.v1.LockService/Acquire", readMaxBytes: LIMITS.lock! },
  { name: "rail-stub", url: () => mesh.railStub.url, path: "/railfence.rail.v1.RailService/SubmitPayment", readMaxBytes: LIMITS["rail-stub"]! },
  {
    name: "rail-control",
    url: () => `http://127.0.0.1:${mesh.railStub.ready!.controlPort}`,
    path: "/railfence.railcontrol.v1.RailControlService/SetFaults",
    readMaxBytes: LIMITS["rail-stub-control"]!,
  },
  { name: "health", url: () => mesh.proxies[0]!.url, path: "/grpc.health.v1.Health/Check", readMaxBytes: LIMITS["rail-proxy"]! },
];
const targetArb = fc.constantFrom(...TARGETS);

async function stores() {
  return { paydb: await paydbState(mesh.dbUrl("paydb")), raildb: await raildbState(mesh.databases.raildb), lockdb: await lockdbState(mesh.dbUrl("lockdb")) };
}
let before: Awaited<ReturnType<typeof stores>>;

beforeAll(async () => {
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
  await mesh.startLock();
  await mesh.startPayouts();
  before = await stores();
});

afterAll(async () => {
  await mesh?.stop();
  tally.write();
  // Shrinking adds cases on failure; a passing run executes at least this many.
  expect(tally.total()).toBeGreaterThanOrEqual(1000);
});

/** Label for the tally and the verdict on one raw answer. */
function expectCleanRaw(a: RawAnswer, what: string, opts: { allowReset?: boolean; grpc?: ReadonlySet<number>; http?: ReadonlySet<number> } = {}): string {
  const label = `${what}: status=${a.status} grpc=${a.grpcStatus} connect=${a.connectCode} rst=${a.rstCode} hung=${a.hung} err=${a.error} msg="${a.grpcMessage ?? a.connectMessage ?? ""}"`;
  expect(a.hung, label).not.toBe(true);
  expectNoLeak(`${a.grpcMessage ?? ""} ${a.connectMessage ?? ""} ${a.body.toString("utf8").slice(0, 2000)}`, what);
  // Every refusal, the framework's included, names its reason in an ErrorInfo.
  if (a.refusal) expect(a.reason ?? "", `${label}: no ErrorInfo reason`).toMatch(/^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/);
  if (a.grpcStatus !== undefined) {
    expect(a.grpcStatus === 0 || (opts.grpc ?? CLEAN_GRPC).has(a.grpcStatus), label).toBe(true);
    return `grpc_${a.grpcStatus}`;
  }
  if (a.connectCode !== undefined) {
    expect(CLEAN_CONNECT.has(a.connectCode), label).toBe(true);
    return `connect_${a.connectCode}`;
  }
  if (a.status === 200) return "http_200";
  if (a.status > 0) {
    // Protocol-level refusals before any handler runs (415 unsupported media type, 404, 405, 408, 413).
    expect((opts.http ?? new Set([400, 404, 405, 408, 413, 415, 431])).has(a.status), label).toBe(true);
    return `http_${a.status}`;
  }
  expect(opts.allowReset && (a.rstCode !== undefined || a.error !== undefined), label).toBe(true);
  return `reset_${a.rstCode ?? "error"}`;
}

describe("gRPC framing", () => {
  it("random bytes behind a truthful, short, long or absurd length prefix get a clean gRPC status", async () => {
    await fc.assert(
      fc.asyncProperty(
        targetArb,
        fc.uint8Array({ maxLength: 300 }),
        fc.oneof(fc.constant(0), fc.integer({ min: -5, max: 5 }), fc.constant(2 ** 31), fc.constant(2 ** 32 - 1)),
        fc.constantFrom(0, 0, 0, 1, 2, 0x80),
        async (t, bytes, delta, flags) => {
          const declared = Math.max(0, Math.min(2 ** 32 - 1, delta > 5 ? delta : bytes.length + delta));
          const a = await rawRequest(t.url(), {
            path: t.path,
            headers: GRPC_HEADERS,
            body: grpcFrame(bytes, { flags, declaredLength: declared }),
            boundMs: 8000,
          });
          tally.record("grpc/random-frame", expectCleanRaw(a, `${t.name} frame len=${bytes.length} declared=${declared} flags=${flags}`));
        },
      ),
      { numRuns: runs(120) },
    );
  });

  it("a truncated frame (fewer bytes than the prefix promises, then end of stream) is refused, not hung", async () => {
    for (const t of TARGETS) {
      const a = await rawRequest(t.url(), {
        path: t.path,
        headers: GRPC_HEADERS,
        body: grpcFrame(new Uint8Array([0x0a, 0x03, 0x61]), { declaredLength: 50 }),
        boundMs: 8000,
      });
      expect(a.grpcStatus, `${t.name}: ${a.grpcMessage}`).toBe(3);
      tally.record("grpc/truncated", expectCleanRaw(a, `${t.name} truncated`));
    }
  });

  it("a frame past readMaxBytes is invalid_argument (REQUEST_TOO_LARGE, never a retryable 429) on every service", async () => {
    for (const t of TARGETS) {
      const big = new Uint8Array(t.readMaxBytes + 100);
      // Field 1 (string) of the right length, so only the size is wrong.
      const a = await rawRequest(t.url(), { path: t.path, headers: GRPC_HEADERS, body: grpcFrame(big), boundMs: 8000 });
      expect(a.grpcStatus, `${t.name}: ${a.grpcMessage}`).toBe(3);
      tally.record("grpc/oversized", expectCleanRaw(a, `${t.name} oversized`));
      // A prefix that merely claims a huge message, with no body behind it.
      const lie = await rawRequest(t.url(), {
        path: t.path,
        headers: GRPC_HEADERS,
        body: grpcFrame(new Uint8Array(0), { declaredLength: 2 ** 31 }),
        boundMs: 8000,
      });
      tally.record("grpc/oversized-claim", expectCleanRaw(lie, `${t.name} claims 2^31 bytes`));
    }
  });

  it("a uint64 varint past 2^64 (11 bytes) and a negative varint in a uint32 field are refused cleanly", async () => {
    const overflow = new Uint8Array([0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]); // field 3 (fencing_token)
    const negU32 = new Uint8Array([0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]); // field 3 (ttl_ms) = -1 as a 10-byte varint
    for (const t of TARGETS) {
      for (const [name, body] of [
        ["varint > 2^64", overflow],
        ["negative uint32", negU32],
      ] as const) {
        const a = await rawRequest(t.url(), { path: t.path, headers: GRPC_HEADERS, body: grpcFrame(body), boundMs: 8000 });
        tally.record("grpc/varint", expectCleanRaw(a, `${t.name} ${name}`));
      }
    }
  });
});

describe("Connect JSON", () => {
  const hostileJson = fc.oneof(
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc
      .record(
        {
          accountId: fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 })),
          payoutId: fc.oneof(fc.string(), fc.double()),
          fencingToken: fc.oneof(
            fc.constantFrom("18446744073709551616", "99999999999999999999999", "-1", "1.5", "1e30", "0x10", "", "NaN", "Infinity"),
            fc.double(),
            fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
          ),
          amount: fc.oneof(
            fc.constant("EUR"),
            fc.record({
              amountMinor: fc.oneof(fc.constantFrom("-1", "9223372036854775808", "1e3"), fc.double()),
              currency: fc.oneof(fc.string(), fc.integer()),
            }),
          ),
          ttlMs: fc.oneof(fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), fc.constantFrom("4294967296", "-1")),
          unknownField: fc.anything(),
          rules: fc.oneof(fc.constant("x"), fc.array(fc.record({ kind: fc.oneof(fc.string(), fc.integer()) }), { maxLength: 3 })),
        },
        { requiredKeys: [] },
      )
      .map((o) => JSON.stringify(o, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))),
    fc.string({ unit: "binary", maxLength: 200 }),
    fc.constantFrom("", "{", "[]", "null", '{"accountId":"a"', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}', "\u0000", "\ufeff{}"),
  );

  it("wrong JSON types, unknown fields, numbers past 2^64 and broken JSON get a clean Connect error or an answer", async () => {
    await fc.assert(
      fc.asyncProperty(targetArb, hostileJson, async (t, body) => {
        const a = await rawRequest(t.url(), { path: t.path, headers: { ...CONNECT_JSON_HEADERS, "idempotency-key": "wire-fuzz" }, body, boundMs: 8000 });
        tally.record("connect/hostile-json", expectCleanRaw(a, `${t.name} json ${body.slice(0, 120)}`));
      }),
      { numRuns: runs(150) },
    );
  });

  it("a JSON body past readMaxBytes is invalid_argument on every service", async () => {
    for (const t of TARGETS) {
      const a = await rawRequest(t.url(), {
        path: t.path,
        headers: CONNECT_JSON_HEADERS,
        body: JSON.stringify({ key: "x".repeat(t.readMaxBytes + 10) }),
        boundMs: 8000,
      });
      expect(a.connectCode, `${t.name}: ${a.status} ${a.body.toString().slice(0, 200)}`).toBe("invalid_argument");
      tally.record("connect/oversized", expectCleanRaw(a, `${t.name} oversized json`));
    }
  });
});

describe("headers and routing", () => {
  it("garbage content types, timeouts, methods and paths are refused cleanly", async () => {
    await fc.assert(
      fc.asyncProperty(
        targetArb,
        fc.record({
          contentType: fc.oneof(
            fc.constantFrom(
              "text/plain",
              "application/xml",
              "application/grpc+json",
              "application/grpc-web",
              "application/proto",
              "application/connect+json",
              "multipart/form-data; boundary=x",
              "",
              "application/grpc; charset=\u00ff",
              "application/json; charset=utf-16",
            ),
            fc.stringMatching(/^[!-~]{0,60}$/),
          ),
          timeout: fc.oneof(
            fc.constant(undefined),
            fc.constantFrom("abc", "-1S", "99999999999H", "1n", "0m", "100000000S", ""),
            fc.stringMatching(/^[0-9]{1,12}[HMSmun]$/),
          ),
          path: fc.oneof(
            fc.constant(undefined),
            fc.constantFrom(
              "/",
              "/railfence.railproxy.v1.RailProxyService/Nope",
              "/nope.Service/Method",
              "/../../etc/passwd",
              "/grpc.health.v1.Health/Watch",
              "/%00",
            ),
            fc.stringMatching(/^\/[!-~]{0,80}$/),
          ),
        }),
        fc.uint8Array({ maxLength: 64 }),
        async (t, h, body) => {
          const headers: http2.OutgoingHttpHeaders = { "content-type": h.contentType, te: "trailers" };
          if (h.timeout !== undefined) headers["grpc-timeout"] = h.timeout;
          const a = await rawRequest(t.url(), { path: h.path ?? t.path, headers, body: grpcFrame(body), boundMs: 8000 });
          tally.record("headers/garbage", expectCleanRaw(a, `${t.name} ct=${h.contentType} timeout=${h.timeout} path=${h.path}`, { allowReset: true }));
        },
      ),
      { numRuns: runs(120) },
    );
  });

  it("a deadline that ends a server stream (Health/Watch) is refused with its reason, in every gRPC dialect (found by npm run hostile, seed 20261201)", async () => {
    for (const contentType of ["application/grpc-web", "application/grpc-web+proto", "application/grpc"]) {
      // An empty HealthCheckRequest (the whole server): Watch answers once, then waits for changes until the deadline.
      const a = await rawRequest(mesh.proxies[0]!.url, {
        path: "/grpc.health.v1.Health/Watch",
        headers: { "content-type": contentType, te: "trailers", "grpc-timeout": "200m" },
        body: grpcFrame(new Uint8Array()),
        boundMs: 8000,
      });
      const label = expectCleanRaw(a, `Watch ${contentType}`, { allowReset: true });
      expect(a.reason, `${contentType}: ${label}`).toBe("DEADLINE_EXCEEDED");
    }
  });

  it("an unknown method is unimplemented over gRPC and Connect", async () => {
    const url = mesh.proxies[0]!.url;
    const g = await rawRequest(url, { path: "/railfence.railproxy.v1.RailProxyService/DropTables", headers: GRPC_HEADERS, body: grpcFrame(new Uint8Array(0)) });
    // connect-node answers an unknown path with HTTP 404, which gRPC clients read as UNIMPLEMENTED.
    expect(g.grpcStatus === 12 || g.status === 404, `status ${g.status} grpc ${g.grpcStatus}`).toBe(true);
    const c = await rawRequest(url, { path: "/railfence.railproxy.v1.RailProxyService/DropTables", headers: CONNECT_JSON_HEADERS, body: "{}" });
    expect(c.status).toBe(404);
    tally.record("headers/unknown-method", "grpc_12");
    tally.record("headers/unknown-method", "http_404");
  });
});

describe("slow and greedy clients", () => {
  it("while 30 slowloris streams dribble their bodies, every service keeps answering other clients", async () => {
    const slow = TARGETS.flatMap((t) => Array.from({ length: 5 }, () => slowStream(t.url(), t.path, GRPC_HEADERS, 50)));
    try {
      for (let round = 0; round < 3; round++) {
        for (const t of TARGETS) await expectServing(t.url());
        const a = await rawRequest(TARGETS[0]!.url(), {
          path: TARGETS[0]!.path,
          headers: GRPC_HEADERS,
          body: grpcFrame(new Uint8Array([0x0a, 0x01, 0x20])),
          boundMs: 5000,
        });
        expect(a.grpcStatus, "a normal call behind the slow ones").toBe(3);
        tally.record("slowloris/others-served", expectCleanRaw(a, "call during slowloris"));
      }
    } finally {
      for (const s of slow) s.stop();
    }
    tally.record("slowloris/streams", `opened_${slow.length}`);
  });

  it("400 concurrent streams on one connection (past maxConcurrentStreams 256) each get a clean answer or a refused stream", async () => {
    for (const t of [TARGETS[0]!, TARGETS[1]!]) {
      const session = http2.connect(t.url());
      session.on("error", () => {});
      try {
        await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()));
        const answers = await Promise.all(
          Array.from({ length: 400 }, (_, i) =>
            i % 2
              ? rawRequest(session, { path: "/grpc.health.v1.Health/Check", headers: GRPC_HEADERS, body: grpcFrame(new Uint8Array(0)), boundMs: 20_000 })
              : rawRequest(session, { path: t.path, headers: GRPC_HEADERS, body: grpcFrame(new Uint8Array([0x0a, 0x01, 0x20])), boundMs: 20_000 }),
          ),
        );
        let served = 0;
        for (const a of answers) {
          const label = expectCleanRaw(a, `${t.name} concurrent`, { allowReset: true });
          tally.record("concurrency/one-connection", label);
          if (a.grpcStatus !== undefined) served += 1;
        }
        expect(served, "most streams on one connection were answered").toBeGreaterThanOrEqual(256);
      } finally {
        session.destroy();
      }
      await expectServing(t.url());
    }
  });
});

describe("after the wire fuzz", () => {
  it("every service is SERVING, nothing reached paydb, the rail ledger or lockdb, and no invariant is violated", async () => {
    for (const t of TARGETS) await expectServing(t.url());
    expect(await stores()).toEqual(before);
    const check = await checkInvariants(meshCheckTarget(mesh));
    expect(check.violations).toEqual([]);
    for (const p of mesh.processes()) expect(p.running, p.name).toBe(true);
    expect(mesh.allLines().filter((l) => l.includes('"level":"fatal"'))).toEqual([]);
  });
});
