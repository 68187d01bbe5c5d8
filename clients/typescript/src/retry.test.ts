import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAttempts } from "./attempts.js";
import { RailfenceError, retryHintMs } from "./errors.js";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { PayoutService } from "./gen/railfence/payouts/v1/payouts_pb.js";
import { classifyOutcome } from "./outcome.js";
import { backoffMs, isTransient, RetryBudget, retryPolicy } from "./retry.js";

/**
 * Real transport failures, not hand-made ConnectErrors: what connect-node itself reports when a
 * server resets the connection after reading the request (a lost answer), and when nothing
 * listens (a connection never made).
 */
let resetting: net.Server;
let resetUrl: string;
let refusedUrl: string;
beforeAll(async () => {
  resetting = net.createServer((s) => s.once("data", () => setTimeout(() => s.resetAndDestroy(), 50)));
  await new Promise<void>((r) => resetting.listen(0, "127.0.0.1", r));
  resetUrl = `http://127.0.0.1:${(resetting.address() as AddressInfo).port}`;
  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  refusedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise<void>((r) => closed.close(() => r()));
});
afterAll(() => new Promise<void>((r) => resetting.close(() => r())));

async function realFailure(url: string): Promise<ConnectError> {
  const client = createClient(PayoutService, createGrpcTransport({ baseUrl: url }));
  return client.getPayout({ payoutId: "po_x" }, { timeoutMs: 5000 }).then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e as ConnectError,
  );
}

/** A server answer: code + ErrorInfo reason (+ RetryInfo). */
function answer(code: Code, reason: string, retryMs?: number): ConnectError {
  const details: Array<{ desc: typeof ErrorInfoSchema | typeof RetryInfoSchema; value: object }> = [
    { desc: ErrorInfoSchema, value: { reason, domain: "railfence.dev", metadata: {} } },
  ];
  if (retryMs !== undefined)
    details.push({
      desc: RetryInfoSchema,
      value: { retryDelay: create(DurationSchema, { seconds: BigInt(Math.floor(retryMs / 1000)), nanos: (retryMs % 1000) * 1e6 }) },
    });
  return new ConnectError("refused", code, undefined, details as never);
}
const transport = (code: Code) => new ConnectError("stream reset", code);

describe("the rules for clients: what is transient", () => {
  it.each([
    ["network error (unavailable, no server answer)", transport(Code.Unavailable), true],
    ["503 IDEMPOTENCY_UNAVAILABLE", answer(Code.Unavailable, "IDEMPOTENCY_UNAVAILABLE", 1000), true],
    ["503 LIMITS_UNAVAILABLE", answer(Code.Unavailable, "LIMITS_UNAVAILABLE", 1000), true],
    ["409 IDEMPOTENCY_CONFLICT", answer(Code.Aborted, "IDEMPOTENCY_CONFLICT", 200), true],
    ["504 deadline", transport(Code.DeadlineExceeded), true],
    ["a transport failure reported as internal", transport(Code.Internal), true],
    ["a server's own internal error", answer(Code.Internal, "INTERNAL"), false],
    ["400 invalid_argument", answer(Code.InvalidArgument, "FIELD_INVALID"), false],
    ["400 IDEMPOTENCY_KEY_REUSED", answer(Code.InvalidArgument, "IDEMPOTENCY_KEY_REUSED"), false],
    ["429 resource_exhausted", answer(Code.ResourceExhausted, "CLIENT_RATE_LIMITED", 5000), false],
    ["409 FENCED_OUT", answer(Code.Aborted, "FENCED_OUT"), false],
    ["403 permission_denied", answer(Code.PermissionDenied, "PERMISSION_DENIED"), false],
    ["404 not_found", answer(Code.NotFound, "PAYOUT_NOT_FOUND"), false],
    ["a stream reset by a dying server (canceled, no server answer)", transport(Code.Canceled), true],
    ["a server's own canceled answer", answer(Code.Canceled, "X"), false],
  ])("%s on a protected call: transient = %s", (_, err, expected) => {
    expect(isTransient(err, true)).toBe(expected);
  });

  it("a real reset (connect-node's aborted, read ECONNRESET, no ErrorInfo) is an unknown outcome, retried on a protected call", async () => {
    const err = await realFailure(resetUrl);
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(Code.Aborted);
    expect(err.rawMessage).toMatch(/ECONNRESET/);
    expect(classifyOutcome(err)).toBe("unknown");
    expect(isTransient(err, true)).toBe(true);
    expect(isTransient(err, false)).toBe(false);
    // Through the attempt loop: the reset attempt is retried, the next one answers.
    let calls = 0;
    const run = await runAttempts(
      { policy: retryPolicy({ budget: false, baseDelayMs: 1 }), endpoints: ["x"], idempotent: true, deadlineMs: 10_000, timeoutMs: 5000 },
      async () => {
        if (++calls === 1) throw await realFailure(resetUrl);
        return "answered";
      },
    );
    expect(run).toMatchObject({ value: "answered", attempts: 2 });
  });

  it("a real refused connection is unreachable (nothing was sent): retried", async () => {
    const err = await realFailure(refusedUrl);
    expect(err.code).toBe(Code.Unavailable);
    expect(classifyOutcome(err)).toBe("unreachable");
    expect(isTransient(err, true)).toBe(true);
  });

  it("a final refusal and a check-status answer are never retried; a server's deadline answer is an unknown outcome", () => {
    expect(classifyOutcome(answer(Code.InvalidArgument, "IDEMPOTENCY_KEY_REUSED"))).toBe("refused");
    expect(classifyOutcome(answer(Code.Aborted, "RAIL_AMBIGUOUS"))).toBe("unknown");
    expect(isTransient(answer(Code.Aborted, "RAIL_AMBIGUOUS"), true)).toBe(false);
    expect(classifyOutcome(answer(Code.DeadlineExceeded, "CALL_TIMEOUT"))).toBe("unknown");
    expect(classifyOutcome(answer(Code.Unavailable, "IDEMPOTENCY_UNAVAILABLE"))).toBe("retry-later");
  });

  it("the caller's own cancellation is final", async () => {
    const ac = new AbortController();
    let calls = 0;
    const err = await runAttempts(
      { policy: retryPolicy({ budget: false }), endpoints: ["x"], idempotent: true, deadlineMs: 5000, timeoutMs: 100, signal: ac.signal },
      async () => {
        calls++;
        ac.abort();
        throw transport(Code.Canceled);
      },
    ).then(
      () => {
        throw new Error("expected a failure");
      },
      (e: unknown) => e as RailfenceError,
    );
    expect(calls).toBe(1);
    expect(err.transient).toBe(false);
  });

  it("a plain exception inside an attempt (a bug) is final, not a transport failure", async () => {
    let calls = 0;
    const err = await runAttempts(
      { policy: retryPolicy({ budget: false }), endpoints: ["x"], idempotent: true, deadlineMs: 5000, timeoutMs: 100 },
      async () => {
        calls++;
        throw new TypeError("bug");
      },
    ).then(
      () => undefined,
      (e: unknown) => e as RailfenceError,
    );
    expect(calls).toBe(1);
    expect(err?.transient).toBe(false);
  });

  it("nothing is transient for a call without duplicate protection", () => {
    for (const err of [transport(Code.Unavailable), transport(Code.DeadlineExceeded), answer(Code.Aborted, "IDEMPOTENCY_CONFLICT")])
      expect(isTransient(err, false)).toBe(false);
  });
});

describe("waits", () => {
  it("full jitter: uniform in [0, min(cap, base * 2^n))", () => {
    expect(backoffMs(0, 100, 5000, () => 0)).toBe(0);
    expect(backoffMs(0, 100, 5000, () => 0.999)).toBe(99);
    expect(backoffMs(3, 100, 5000, () => 0.5)).toBe(400);
    expect(backoffMs(20, 100, 5000, () => 0.999)).toBe(4995); // capped
  });

  it("reads the server's hint from RetryInfo, else Retry-After", () => {
    expect(retryHintMs(answer(Code.Unavailable, "X", 1500))).toBe(1500);
    expect(retryHintMs(new ConnectError("x", Code.Unavailable, new Headers({ "retry-after": "3" })))).toBe(3000);
    expect(retryHintMs(transport(Code.Unavailable))).toBeUndefined();
  });

  it("never retries sooner than the server's hint", async () => {
    const times: number[] = [];
    await runAttempts(
      { policy: retryPolicy({ baseDelayMs: 1 }, () => 0), endpoints: ["x"], idempotent: true, deadlineMs: 5000, timeoutMs: 1000 },
      async (a) => {
        times.push(Date.now());
        if (a.attempt < 3) throw answer(Code.Unavailable, "IDEMPOTENCY_UNAVAILABLE", 300);
        return "ok";
      },
    );
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(295);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(295);
  });
});

describe("bounds", () => {
  it("the budget (gRFC A6) stops retries at half the tokens and refills on success", () => {
    const b = new RetryBudget(4, 0.5);
    expect(b.allowsRetry).toBe(true);
    b.onFailure();
    expect(b.allowsRetry).toBe(true); // 3 > 2
    b.onFailure();
    expect(b.allowsRetry).toBe(false); // 2
    b.onSuccess();
    expect(b.allowsRetry).toBe(true); // 2.5
  });

  it("gives up at the deadline without starting a wait that would end past it", async () => {
    const started = Date.now();
    const err = await runAttempts(
      { policy: retryPolicy({ budget: false }), endpoints: ["x"], idempotent: true, deadlineMs: 400, timeoutMs: 1000 },
      async () => {
        throw answer(Code.Unavailable, "IDEMPOTENCY_UNAVAILABLE", 1000);
      },
    ).then(
      () => {
        throw new Error("expected a failure");
      },
      (e: unknown) => e as RailfenceError,
    );
    expect(err).toBeInstanceOf(RailfenceError);
    expect(err.gaveUp).toBe("deadline");
    expect(err.attempts).toBe(1);
    expect(err.retryAfterMs).toBe(1000); // the caller can schedule its own retry
    expect(Date.now() - started).toBeLessThan(300);
  });

  it("gives each attempt what is left of the deadline", async () => {
    const timeouts: number[] = [];
    await runAttempts(
      { policy: retryPolicy({ budget: false, baseDelayMs: 1 }, () => 0), endpoints: ["x"], idempotent: true, deadlineMs: 1000, timeoutMs: 10_000 },
      async (a) => {
        timeouts.push(a.timeoutMs);
        if (a.attempt === 1) throw answer(Code.Unavailable, "X", 300);
        return 1;
      },
    );
    expect(timeouts[0]).toBeLessThanOrEqual(1000);
    expect(timeouts[1]).toBeLessThanOrEqual(710);
  });

  it("stops after maxAttempts, and rotates endpoints on each retry", async () => {
    const seen: string[] = [];
    const err = await runAttempts(
      { policy: retryPolicy({ maxAttempts: 3, budget: false, baseDelayMs: 1 }), endpoints: ["a", "b"], idempotent: true, deadlineMs: 5000, timeoutMs: 100 },
      async (a) => {
        seen.push(a.endpoint);
        throw transport(Code.Unavailable);
      },
    ).then(
      () => {
        throw new Error("expected a failure");
      },
      (e: unknown) => e as RailfenceError,
    );
    expect(err.gaveUp).toBe("attempts");
    expect(seen).toEqual(["a", "b", "a"]);
  });

  it("a final refusal is reported after one attempt, with its reason and metadata", async () => {
    let calls = 0;
    const err = await runAttempts({ policy: retryPolicy(), endpoints: ["x"], idempotent: true, deadlineMs: 5000, timeoutMs: 100 }, async () => {
      calls++;
      throw answer(Code.InvalidArgument, "IDEMPOTENCY_KEY_REUSED");
    }).then(
      () => {
        throw new Error("expected a failure");
      },
      (e: unknown) => e as RailfenceError,
    );
    expect(calls).toBe(1);
    expect(err).toMatchObject({
      code: Code.InvalidArgument,
      reason: "IDEMPOTENCY_KEY_REUSED",
      domain: "railfence.dev",
      transient: false,
      attempts: 1,
      gaveUp: undefined,
    });
    expect(err.codeName).toBe("invalid_argument");
  });
});
