/**
 * Property-based hostile input for PayoutService (with its Idempotency-Key header) and
 * LockService, over binary gRPC and Connect JSON, against real processes on a real paydb and
 * lockdb. Invalid-only runs must leave payouts, idempotency keys and leases exactly as they were.
 */
import { Code } from "@connectrpc/connect";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { testMesh } from "../support/test-mesh.js";
import { ClientPool, expectServing, PROTOCOLS, type Protocol } from "./fuzz-clients.js";
import {
  anyBeneficiary,
  anyId,
  anyMoney,
  anyPageToken,
  anyU32,
  hostileString,
  isValidBeneficiary,
  isValidId,
  moneyViolation,
  textViolation,
  textWithForbidden,
  validBeneficiary,
  validId,
  validMoney,
  type MoneyInit,
} from "./hostile.js";
import { bounded, expectCleanError, settle } from "./outcome.js";
import { documentedRequestLimits } from "./wire-targets.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { lockdbState, paydbState } from "./state.js";
import { FuzzTally } from "./summary.js";
import { runs } from "../support/fast-check-seed.js";

const CALL_BOUND_MS = 10_000;
const LIMITS = documentedRequestLimits(); // docs/limits.md
const READ_MAX_BYTES = { payouts: LIMITS.payouts!, lock: LIMITS.lock! };
let mesh: Mesh;
let pool: ClientPool;
let payouts: Record<Protocol, ReturnType<typeof payoutsOf>>;
let lock: Record<Protocol, ReturnType<typeof lockOf>>;
const tally = new FuzzTally("payouts-lock");
const payoutsOf = (url: string, p: Protocol) => pool.client(PayoutService, url, p);
const lockOf = (url: string, p: Protocol) => pool.client(LockService, url, p);
const protocolArb = fc.constantFrom(...PROTOCOLS);

beforeAll(async () => {
  mesh = testMesh({ proxies: 0 });
  await mesh.startDatabases();
  await mesh.startLock();
  await mesh.startPayouts();
  pool = new ClientPool();
  payouts = { grpc: payoutsOf(mesh.payouts!.url, "grpc"), "connect-json": payoutsOf(mesh.payouts!.url, "connect-json") };
  lock = { grpc: lockOf(mesh.lock!.url, "grpc"), "connect-json": lockOf(mesh.lock!.url, "connect-json") };
});

afterAll(async () => {
  pool?.close();
  await mesh?.stop();
  tally.write();
  // Shrinking adds cases on failure; a passing run executes at least this many.
  expect(tally.total()).toBeGreaterThanOrEqual(450);
});

/** Idempotency keys: missing, empty, too long, spaces, non-ASCII, and good ones. */
const anyKey = fc.oneof(
  fc.constant(undefined),
  fc.constantFrom("", "a b", "key\twith-tab", "k\u00e9y", "x".repeat(256), "y".repeat(255)),
  fc.uuid(),
  fc.stringMatching(/^[!-~]{1,300}$/),
);
const isValidKey = (k: string) => k.length <= 255 && /^[\x21-\x7e]+$/.test(k);

interface CreateInit {
  accountId: string;
  amount: MoneyInit | undefined;
  beneficiary: string;
  clientReference: string;
}

/** RESILIENCE.md + SPEC payouts: the first violation in check order (reason, field) or undefined. */
function createViolation(key: string | undefined, r: CreateInit): [string, string] | undefined {
  if (key === undefined || key === "") return ["IDEMPOTENCY_KEY_MISSING", "idempotency-key"];
  if (!isValidKey(key)) return ["IDEMPOTENCY_KEY_INVALID", "idempotency-key"];
  if (!isValidId(r.accountId)) return [r.accountId ? "FIELD_INVALID" : "FIELD_REQUIRED", "account_id"];
  const m = moneyViolation("amount", r.amount);
  if (m) return ["", m];
  if (!isValidBeneficiary(r.beneficiary)) return ["", "beneficiary"];
  if (textViolation(r.clientReference, 0, 128)) return ["", "client_reference"];
  return undefined;
}

const anyCreate: fc.Arbitrary<CreateInit> = fc.record({
  accountId: anyId,
  amount: anyMoney,
  beneficiary: anyBeneficiary,
  clientReference: fc.oneof(fc.constant(""), validId, hostileString(300)),
});

const bigintJson = (_k: string, v: unknown) => (typeof v === "bigint" ? String(v) : v);

describe("PayoutService", () => {
  it("CreatePayout: an invalid request or key is invalid_argument naming the first bad field, and nothing is written", async () => {
    const before = await paydbState(mesh.dbUrl("paydb"));
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(anyKey, anyCreate).filter(([k, r]) => createViolation(k, r) !== undefined),
        protocolArb,
        async ([key, req], protocol) => {
          const headers: Record<string, string> = key === undefined ? {} : { "idempotency-key": key };
          const res = await bounded(settle(payouts[protocol].createPayout(req, { headers })), CALL_BOUND_MS, "CreatePayout");
          tally.recordSettled("CreatePayout/invalid", res);
          expect(res.ok, `accepted ${JSON.stringify(req, bigintJson)}`).toBe(false);
          if (res.ok) return;
          const [reason, field] = createViolation(key, req)!;
          const size = JSON.stringify(req, bigintJson).length;
          if (size > READ_MAX_BYTES.payouts - 512) {
            expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted] }, "CreatePayout big");
          } else {
            expectCleanError(
              res.error,
              { codes: [Code.InvalidArgument], field, reasons: reason ? [reason] : undefined },
              `CreatePayout key=${key?.slice(0, 40)} ${JSON.stringify(req, bigintJson).slice(0, 200)}`,
            );
          }
        },
      ),
      { numRuns: runs(120) },
    );
    expect(await paydbState(mesh.dbUrl("paydb"))).toEqual(before);
  });

  it("CreatePayout: any request with any key is created, replayed, or refused cleanly", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.uuid(), anyKey),
        fc.record({
          accountId: fc.oneof(validId, anyId),
          amount: fc.oneof(validMoney, anyMoney),
          beneficiary: fc.oneof(validBeneficiary, anyBeneficiary),
          clientReference: fc.oneof(fc.constant(""), hostileString(200)),
        }),
        protocolArb,
        async (key, req, protocol) => {
          const headers: Record<string, string> = key === undefined ? {} : { "idempotency-key": key };
          const res = await bounded(settle(payouts[protocol].createPayout(req, { headers })), CALL_BOUND_MS, "CreatePayout");
          tally.recordSettled("CreatePayout/any", res);
          if (res.ok) {
            expect(createViolation(key, req), "accepted an invalid request").toBeUndefined();
            expect(res.value.payout?.payoutId).toBeTruthy();
            return;
          }
          // A reused random key may legitimately replay, conflict (aborted IDEMPOTENCY_CONFLICT) or
          // be refused as reused; a huge amount meets the daily limit (429, or failed_precondition
          // PAYOUT_ABOVE_DAILY_LIMIT when it alone exceeds it).
          expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.Aborted, Code.ResourceExhausted, Code.FailedPrecondition] }, "CreatePayout any");
        },
      ),
      { numRuns: runs(50) },
    );
  });

  it("CreatePayout: a client_reference with a control, bidi or invisible character is FIELD_INVALID naming it, and nothing is written", async () => {
    const before = await paydbState(mesh.dbUrl("paydb"));
    await fc.assert(
      fc.asyncProperty(
        fc.uuid(),
        validId,
        validMoney,
        validBeneficiary,
        textWithForbidden(128),
        protocolArb,
        async (key, accountId, amount, beneficiary, clientReference, protocol) => {
          const res = await bounded(
            settle(payouts[protocol].createPayout({ accountId, amount, beneficiary, clientReference }, { headers: { "idempotency-key": key } })),
            CALL_BOUND_MS,
            "CreatePayout",
          );
          tally.recordSettled("CreatePayout/forbidden-text", res);
          expect(res.ok, `created with client_reference ${JSON.stringify(clientReference)}`).toBe(false);
          if (res.ok) return;
          const ce = expectCleanError(
            res.error,
            { codes: [Code.InvalidArgument], reasons: ["FIELD_INVALID"], field: "client_reference" },
            `client_reference ${JSON.stringify(clientReference)}`,
          );
          expect(errorInfo(ce)?.metadata.code_point).toMatch(/^U\+[0-9A-F]{4,6}$/);
        },
      ),
      { numRuns: runs(50) },
    );
    expect(await paydbState(mesh.dbUrl("paydb"))).toEqual(before);
  });

  it("GetPayout with any id: not_found or invalid_argument naming payout_id", async () => {
    await fc.assert(
      fc.asyncProperty(anyId, protocolArb, async (payoutId, protocol) => {
        const res = await bounded(settle(payouts[protocol].getPayout({ payoutId })), CALL_BOUND_MS, "GetPayout");
        tally.recordSettled("GetPayout", res);
        if (res.ok) return;
        if (isValidId(payoutId)) expectCleanError(res.error, { codes: [Code.NotFound], reasons: ["PAYOUT_NOT_FOUND"] }, "GetPayout");
        else expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted], field: "payout_id" }, "GetPayout");
      }),
      { numRuns: runs(60) },
    );
  });

  it("ListPayouts with any filter, state, page size and token: a page or a clean invalid_argument", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constant(""), anyId),
        fc.oneof(fc.constantFrom(0, 1, 2, 3, 4, 5, 6, -1), fc.integer()),
        anyU32,
        anyPageToken,
        protocolArb,
        async (accountId, state, pageSize, pageToken, protocol) => {
          const res = await bounded(settle(payouts[protocol].listPayouts({ accountId, state, pageSize, pageToken })), CALL_BOUND_MS, "ListPayouts");
          tally.recordSettled("ListPayouts", res);
          if (res.ok) return;
          expectCleanError(
            res.error,
            { codes: [Code.InvalidArgument, Code.ResourceExhausted], reasons: ["FIELD_INVALID", "FIELD_REQUIRED", "PAGE_SIZE_INVALID", "PAGE_TOKEN_INVALID"] },
            `ListPayouts ${state} ${pageSize}`,
          );
        },
      ),
      { numRuns: runs(80) },
    );
  });
});

const KEY_RE = /^[A-Za-z0-9._:/-]{1,200}$/;
const anyLockKey = fc.oneof(
  fc.stringMatching(KEY_RE).map((k) => `fz/${k}`.slice(0, 200)),
  hostileString(400),
);
const anyOwner = fc.oneof(fc.stringMatching(/^[ -~]{1,200}$/), hostileString(400));
const anyLeaseId = fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{32}$/), hostileString(100));

/** SPEC lock: the first invalid field of an Acquire, or undefined. */
function acquireViolation(r: { key: string; owner: string; ttlMs: number; waitMs: number }): string | undefined {
  if (!KEY_RE.test(r.key)) return "key";
  if (textViolation(r.owner, 1, 200) || !/^[\x20-\x7e]+$/.test(r.owner)) return "owner";
  if (r.ttlMs < 100 || r.ttlMs > 600_000) return "ttl_ms";
  if (r.waitMs > 60_000) return "wait_ms";
  return undefined;
}

describe("LockService", () => {
  it("Acquire: an invalid request is invalid_argument naming the first bad field, and no lease or token changes", async () => {
    const before = await lockdbState(mesh.dbUrl("lockdb"));
    await fc.assert(
      fc.asyncProperty(
        fc.record({ key: anyLockKey, owner: anyOwner, ttlMs: anyU32, waitMs: anyU32 }).filter((r) => acquireViolation(r) !== undefined),
        protocolArb,
        async (req, protocol) => {
          const res = await bounded(settle(lock[protocol].acquire(req)), CALL_BOUND_MS, "Acquire");
          tally.recordSettled("Acquire/invalid", res);
          expect(res.ok).toBe(false);
          if (res.ok) return;
          if (JSON.stringify(req).length > READ_MAX_BYTES.lock - 256)
            expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted] }, "Acquire big");
          else expectCleanError(res.error, { codes: [Code.InvalidArgument], field: acquireViolation(req) }, `Acquire ${JSON.stringify(req).slice(0, 200)}`);
        },
      ),
      { numRuns: runs(100) },
    );
    expect(await lockdbState(mesh.dbUrl("lockdb"))).toEqual(before);
  });

  it("Acquire: a valid request gets a lease or LOCK_HELD; tokens never repeat", async () => {
    const tokens = new Map<string, bigint>();
    await fc.assert(
      fc.asyncProperty(
        fc.stringMatching(/^[a-z0-9]{1,8}$/).map((k) => `fz-valid/${k}`),
        fc.stringMatching(/^[ -~]{1,200}$/),
        fc.integer({ min: 100, max: 600_000 }),
        protocolArb,
        async (key, owner, ttlMs, protocol) => {
          const res = await bounded(settle(lock[protocol].acquire({ key, owner, ttlMs, waitMs: 0 })), CALL_BOUND_MS, "Acquire");
          tally.recordSettled("Acquire/valid", res);
          if (!res.ok) return void expectCleanError(res.error, { codes: [Code.Aborted], reasons: ["LOCK_HELD"] }, "Acquire valid");
          const token = res.value.lease!.fencingToken;
          const last = tokens.get(key);
          if (last !== undefined) expect(token > last, `token for ${key} went ${last} -> ${token}`).toBe(true);
          tokens.set(key, token);
        },
      ),
      { numRuns: runs(40) },
    );
  });

  it("Renew / Release / Inspect with hostile keys and forged lease ids: clean refusals, and a held lease is untouched", async () => {
    const held = (await lock.grpc.acquire({ key: "fz-held/one", owner: "fuzz", ttlMs: 600_000, waitMs: 0 })).lease!;
    const before = await lockdbState(mesh.dbUrl("lockdb"));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(anyLockKey, fc.constant(held.key)),
        fc.oneof(anyLeaseId, fc.constant(held.leaseId.slice(0, -1) + (held.leaseId.endsWith("A") ? "B" : "A"))),
        anyU32,
        fc.constantFrom("renew", "release", "inspect"),
        protocolArb,
        async (key, leaseId, ttlMs, op, protocol) => {
          const call: Promise<unknown> =
            op === "renew"
              ? lock[protocol].renew({ key, leaseId, ttlMs })
              : op === "release"
                ? lock[protocol].release({ key, leaseId })
                : lock[protocol].inspect({ key });
          const res = await bounded(settle(call), CALL_BOUND_MS, op);
          tally.recordSettled(`${op[0]!.toUpperCase()}${op.slice(1)}`, res);
          if (res.ok) {
            if (op === "release") expect((res.value as { released: boolean }).released, "a forged lease id released a lease").toBe(false);
            expect(op, "a forged lease id renewed a lease").not.toBe("renew");
            return;
          }
          expectCleanError(
            res.error,
            {
              codes: [Code.InvalidArgument, Code.FailedPrecondition, Code.ResourceExhausted],
              reasons: ["FIELD_REQUIRED", "KEY_INVALID", "LEASE_ID_INVALID", "TTL_INVALID", "LEASE_LOST", "LEASE_NOT_HELD"],
              ...(KEY_RE.test(key) ? {} : { field: "key" }),
            },
            `${op} ${key.slice(0, 60)}`,
          );
        },
      ),
      { numRuns: runs(100) },
    );
    expect(await lockdbState(mesh.dbUrl("lockdb"))).toEqual(before);
    const inspect = await lock.grpc.inspect({ key: held.key });
    expect(inspect.held).toBe(true);
    expect(inspect.fencingToken).toBe(held.fencingToken);
  });
});

describe("after the fuzz runs", () => {
  it("payouts and lock still answer health SERVING and logged no internal error", async () => {
    await expectServing(mesh.payouts!.url);
    await expectServing(mesh.lock!.url);
    expect(mesh.allLines().filter((l) => l.includes('"level":"error"') || l.includes('"level":"fatal"'))).toEqual([]);
  });
});
