/**
 * Property-based hostile input for every RailProxyService RPC, over binary gRPC and Connect
 * JSON, against a real rail-proxy, rail-stub and paydb. Every case gets a valid answer or a
 * clean refusal; invalid-only runs leave marks, intents and the rail ledger exactly as they
 * were; afterwards the proxy still answers health SERVING and the invariant checker finds
 * nothing paid wrongly. A valid request is submitted as the payout's holder would submit it
 * (the payout fenced for it first), so the admission path, not only the binding, is fuzzed.
 */
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import fc from "fast-check";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { checkInvariants, meshCheckTarget } from "../../tools/harness/invariants.js";
import { encodePageToken } from "../../services/shared/domain/page-token.js";
import { RailProxyService, SubmitPayoutRequestSchema, type SubmitPayoutRequest } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { db } from "../support/clients.js";
import { fencedFor, fencePayout } from "../support/fenced-payout.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { testMesh } from "../support/test-mesh.js";
import { ClientPool, expectServing, PROTOCOLS, type Protocol } from "./fuzz-clients.js";
import {
  anyBeneficiary,
  anyId,
  anyMoney,
  anyPageToken,
  anyToken,
  anyU32,
  hostileString,
  I64_MAX,
  I64_MIN,
  isValidBeneficiary,
  isValidId,
  MAX_TOKEN,
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
import { paydbState, raildbState } from "./state.js";
import { FuzzTally } from "./summary.js";
import { runs } from "../support/fast-check-seed.js";

const READ_MAX_BYTES = documentedRequestLimits()["rail-proxy"]!; // docs/limits.md
const CALL_BOUND_MS = 10_000;

let mesh: Mesh;
let paydb: pg.Client;
let pool: ClientPool;
let proxy: Record<Protocol, ReturnType<typeof clientOf>>;
const tally = new FuzzTally("rail-proxy");
const clientOf = (p: ClientPool, url: string, protocol: Protocol) => p.client(RailProxyService, url, protocol);
const url = () => mesh.proxies[0]!.url;
const protocolArb = fc.constantFrom(...PROTOCOLS);

async function state() {
  return { paydb: await paydbState(mesh.dbUrl("paydb")), raildb: await raildbState(mesh.databases.raildb) };
}

beforeAll(async () => {
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
  paydb = await db(mesh.dbUrl("paydb"));
  pool = new ClientPool();
  const url = mesh.proxies[0]!.url;
  proxy = { grpc: clientOf(pool, url, "grpc"), "connect-json": clientOf(pool, url, "connect-json") };
});

afterAll(async () => {
  pool?.close();
  await paydb?.end();
  await mesh?.stop();
  tally.write();
  // Shrinking adds cases on failure; a passing run executes at least this many.
  expect(tally.total()).toBeGreaterThanOrEqual(400);
});

interface SubmitInit {
  accountId: string;
  payoutId: string;
  fencingToken: bigint;
  amount: MoneyInit | undefined;
  beneficiary: string;
}

/** An attempt reference, `<payout id>:t<token>` (SPEC C3 §3.9). */
const ATTEMPT_REFERENCE = /^(.+):t(\d{1,19})$/;

/** SPEC C3 §3.5 step 0: the first invalid field in check order, or undefined. */
function firstViolation(r: SubmitInit): string | undefined {
  if (!isValidId(r.accountId)) return "account_id";
  if (!isValidId(r.payoutId)) return "payout_id";
  if (r.fencingToken <= 0n || r.fencingToken > MAX_TOKEN) return "fencing_token";
  const m = moneyViolation("amount", r.amount);
  if (m) return m;
  if (!isValidBeneficiary(r.beneficiary)) return "beneficiary";
  // §3.9, checked last: an attempt reference must name the token it is submitted with.
  const attempt = ATTEMPT_REFERENCE.exec(r.payoutId);
  if (attempt && BigInt(attempt[2]!) !== r.fencingToken) return "payout_id";
  return undefined;
}

/** Bytes the server reads for this request over protocol (decides invalid_argument vs resource_exhausted). */
function wireSize(r: SubmitInit, protocol: Protocol): number {
  const msg = create(SubmitPayoutRequestSchema, r);
  return protocol === "grpc" ? toBinary(SubmitPayoutRequestSchema, msg).length : Buffer.byteLength(toJsonString(SubmitPayoutRequestSchema, msg));
}

const anySubmit: fc.Arbitrary<SubmitInit> = fc.record({
  accountId: anyId,
  payoutId: anyId,
  fencingToken: anyToken,
  amount: anyMoney,
  beneficiary: anyBeneficiary,
});

describe("SubmitPayout", () => {
  it("an invalid request is refused with invalid_argument naming the first bad field (REQUEST_TOO_LARGE when too big), and changes nothing", async () => {
    const before = await state();
    const callsBefore = await railCalls();
    await fc.assert(
      fc.asyncProperty(
        anySubmit.filter((r) => firstViolation(r) !== undefined),
        protocolArb,
        async (req, protocol) => {
          const res = await bounded(settle(proxy[protocol].submitPayout(req as SubmitPayoutRequest)), CALL_BOUND_MS, "SubmitPayout");
          tally.recordSettled("SubmitPayout/invalid", res);
          expect(res.ok, `invalid request was accepted: ${JSON.stringify(req, bigintJson)}`).toBe(false);
          if (res.ok) return;
          if (wireSize(req, protocol) > READ_MAX_BYTES) {
            expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["REQUEST_TOO_LARGE"] }, "SubmitPayout oversized");
          } else {
            expectCleanError(
              res.error,
              { codes: [Code.InvalidArgument], field: firstViolation(req) },
              `SubmitPayout ${JSON.stringify(req, bigintJson).slice(0, 200)}`,
            );
          }
        },
      ),
      { numRuns: runs(150) },
    );
    expect(await state()).toEqual(before);
    expect(await railCalls()).toBe(callsBefore);
    expect(tally.cases("SubmitPayout/invalid")).toBeGreaterThanOrEqual(150);
  });

  it("an arbitrary request (valid or hostile) gets an admission or a clean refusal; admitted ones are paid exactly once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          accountId: fc.oneof(
            validId.map((s) => `fz-${s}`.slice(0, 64)),
            anyId,
          ),
          payoutId: fc.oneof(validId, anyId),
          fencingToken: fc.oneof(fc.bigInt({ min: 1n, max: MAX_TOKEN }), anyToken),
          amount: fc.oneof(validMoney, anyMoney),
          beneficiary: fc.oneof(validBeneficiary, anyBeneficiary),
        }),
        protocolArb,
        async (req, protocol) => {
          const violation = firstViolation(req);
          // A valid request comes from the payout's holder: the payout is created and fenced for
          // it, unless an earlier case made that payout id pay something else or fenced it higher.
          const held = violation === undefined && (await fencePayout(paydb, req));
          const res = await bounded(settle(proxy[protocol].submitPayout(req as SubmitPayoutRequest)), CALL_BOUND_MS, "SubmitPayout");
          tally.recordSettled("SubmitPayout/any", res);
          if (res.ok) {
            expect(violation, "accepted a request the contract refuses").toBeUndefined();
            expect(held, "admitted a request its payout does not match").toBe(true);
            expect(res.value.submission?.payoutId).toBe(req.payoutId);
            return;
          }
          if (violation !== undefined) {
            expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted] }, "SubmitPayout");
          } else if (held) {
            // A valid request can still meet a higher mark or a reused payout id: fenced, never paid twice.
            expectCleanError(
              res.error,
              { codes: [Code.Aborted, Code.AlreadyExists], reasons: ["FENCED_OUT", "DUPLICATE_SUBMISSION", "PAYOUT_ALREADY_SUBMITTED"] },
              "SubmitPayout valid",
            );
          } else {
            // The payout id was taken by an earlier case for another payment, or a newer token holds it.
            expectCleanError(
              res.error,
              { codes: [Code.Aborted, Code.FailedPrecondition], reasons: ["FENCED_OUT", "PAYOUT_MISMATCH", "PAYOUT_FENCE_MISMATCH"] },
              "SubmitPayout valid, payout not held",
            );
          }
        },
      ),
      { numRuns: runs(40) },
    );
    const check = await checkInvariants(meshCheckTarget(mesh));
    expect(check.violations).toEqual([]);
  });

  it("a message larger than readMaxBytes is invalid_argument REQUEST_TOO_LARGE over both protocols and changes nothing", async () => {
    const before = await state();
    // Fresh sessions every 40 cases: the *sending* side's HTTP/2 session keeps the unsent rest of
    // each refused body counted against its own maxSessionMemory (10 MB), so at hostile scale one
    // session fills up and every later call on it fails (test/transport/refused-body-connection.test.ts).
    let sessionPool = new ClientPool();
    let sender = { grpc: clientOf(sessionPool, url(), "grpc"), "connect-json": clientOf(sessionPool, url(), "connect-json") };
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: READ_MAX_BYTES + 1, max: 200_000 }),
        fc.constantFrom("accountId", "payoutId", "beneficiary"),
        protocolArb,
        async (size, field, protocol) => {
          if (++sent % 40 === 0) {
            sessionPool.close();
            sessionPool = new ClientPool();
            sender = { grpc: clientOf(sessionPool, url(), "grpc"), "connect-json": clientOf(sessionPool, url(), "connect-json") };
          }
          const req = {
            accountId: "acc-big",
            payoutId: "p-big",
            fencingToken: 5n,
            amount: { amountMinor: 5n, currency: "EUR" },
            beneficiary: "ben",
            [field]: "x".repeat(size),
          };
          const res = await bounded(settle(sender[protocol].submitPayout(req)), CALL_BOUND_MS, "SubmitPayout oversized");
          tally.recordSettled("SubmitPayout/oversized", res);
          expect(res.ok).toBe(false);
          expectCleanError(res.ok ? undefined : res.error, { codes: [Code.InvalidArgument], reasons: ["REQUEST_TOO_LARGE"] }, "oversized");
        },
      ),
      { numRuns: runs(8) },
    );
    sessionPool.close();
    expect(await state()).toEqual(before);
  });
});

describe("reads and resolution", () => {
  it("GetSubmission with any payout id: not_found, invalid_argument naming payout_id, or the row", async () => {
    // One real submission, so the "the row" branch runs on every seed (not only when a random id
    // happens to match one another test created).
    const existing = { accountId: "acc-get-fz", payoutId: "p-get-fz", fencingToken: 1n, amount: { amountMinor: 10n, currency: "EUR" }, beneficiary: "ben" };
    await proxy.grpc.submitPayout(await fencedFor(paydb, existing));
    await fc.assert(
      fc.asyncProperty(fc.oneof(anyId, fc.constant(existing.payoutId)), protocolArb, async (payoutId, protocol) => {
        const res = await bounded(settle(proxy[protocol].getSubmission({ payoutId })), CALL_BOUND_MS, "GetSubmission");
        tally.recordSettled("GetSubmission", res);
        if (payoutId === existing.payoutId) expect(res.ok, "GetSubmission did not find an existing submission").toBe(true);
        if (res.ok) {
          // A statement, not a returned value: fast-check fails a property that returns false.
          expect(res.value.submission?.payoutId).toBe(payoutId);
          return;
        }
        if (isValidId(payoutId)) expectCleanError(res.error, { codes: [Code.NotFound], reasons: ["SUBMISSION_NOT_FOUND"] }, "GetSubmission");
        else expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted], field: "payout_id" }, "GetSubmission");
      }),
      { numRuns: runs(60) },
    );
  });

  it("ListUnresolved with any page size and page token: a page or invalid_argument (PAGE_SIZE_INVALID / PAGE_TOKEN_INVALID)", async () => {
    await fc.assert(
      fc.asyncProperty(anyU32, anyPageToken, protocolArb, async (pageSize, pageToken, protocol) => {
        const res = await bounded(settle(proxy[protocol].listUnresolved({ pageSize, pageToken })), CALL_BOUND_MS, "ListUnresolved");
        tally.recordSettled("ListUnresolved", res);
        if (res.ok) {
          expect(pageSize).toBeLessThanOrEqual(500);
          return;
        }
        expectCleanError(
          res.error,
          { codes: [Code.InvalidArgument], reasons: ["PAGE_SIZE_INVALID", "PAGE_TOKEN_INVALID"] },
          `ListUnresolved ${pageSize} ${pageToken.slice(0, 80)}`,
        );
      }),
      { numRuns: runs(80) },
    );
  });

  it("ResolveSubmission with hostile input: a clean refusal, and nothing is resolved", async () => {
    // One real, non-ambiguous submission for the valid-id cases to find.
    const existing = {
      accountId: "acc-resolve-fz",
      payoutId: "p-resolve-fz",
      fencingToken: 1n,
      amount: { amountMinor: 10n, currency: "EUR" },
      beneficiary: "ben",
    };
    // Not caught: without this submission the NOT_AMBIGUOUS path below would never run.
    const setUp = await proxy.grpc.submitPayout(await fencedFor(paydb, existing));
    expect(setUp.submission?.ambiguous).toBe(false);
    const before = await state();
    let notAmbiguous = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(anyId, fc.constant(existing.payoutId)),
        fc.oneof(fc.constantFrom(0, 1, 2, 3, -1, 2 ** 31 - 1), fc.integer()),
        fc.oneof(hostileString(300), fc.constantFrom("operator:alice", "reconciler")),
        fc.oneof(hostileString(1500), fc.constant("")),
        protocolArb,
        async (payoutId, outcome, actor, note, protocol) => {
          const res = await bounded(settle(proxy[protocol].resolveSubmission({ payoutId, outcome, actor, note })), CALL_BOUND_MS, "ResolveSubmission");
          tally.recordSettled("ResolveSubmission", res);
          expect(res.ok, "resolved a submission that is not ambiguous").toBe(false);
          if (res.ok) return;
          // PAID (1) without the rail's reference of the payment is invalid too.
          const invalid =
            !isValidId(payoutId) || (outcome !== 1 && outcome !== 2) || textViolation(actor, 1, 128) || textViolation(note, 0, 1000) || outcome === 1;
          if (invalid) expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted] }, "ResolveSubmission invalid");
          else {
            expectCleanError(
              res.error,
              { codes: [Code.NotFound, Code.FailedPrecondition], reasons: ["SUBMISSION_NOT_FOUND", "NOT_AMBIGUOUS"] },
              "ResolveSubmission",
            );
            if (errorInfo(res.error)?.reason === "NOT_AMBIGUOUS") notAmbiguous++;
          }
        },
      ),
      { numRuns: runs(80) },
    );
    expect(notAmbiguous, "the real submission was never asked to be resolved").toBeGreaterThan(0);
    expect(await state()).toEqual(before);
  });

  it("ResolveSubmission: an actor or note with a control, bidi or invisible character is FIELD_INVALID naming it, and nothing is resolved", async () => {
    const before = await state();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("actor", "note"), textWithForbidden(100), protocolArb, async (field, text, protocol) => {
        const req = { payoutId: "p-resolve-fz", outcome: 1, actor: "operator:alice", note: "matched", [field]: text };
        const res = await bounded(settle(proxy[protocol].resolveSubmission(req)), CALL_BOUND_MS, "ResolveSubmission");
        tally.recordSettled("ResolveSubmission/forbidden-text", res);
        expect(res.ok, `accepted ${field}=${JSON.stringify(text)}`).toBe(false);
        if (res.ok) return;
        const ce = expectCleanError(
          res.error,
          { codes: [Code.InvalidArgument], reasons: ["FIELD_INVALID"], field },
          `ResolveSubmission ${field}=${JSON.stringify(text)}`,
        );
        expect(errorInfo(ce)?.metadata.code_point).toMatch(/^U\+[0-9A-F]{4,6}$/);
      }),
      { numRuns: runs(40) },
    );
    expect(await state()).toEqual(before);
  });

  it("GetRailStatement with any since / after_sequence / page size: a statement page or a clean refusal", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.option(
          fc.oneof(
            fc.integer({ min: -1e15, max: 1e15 }).map((ms) => timestampFromMs(ms)),
            fc.record({ seconds: fc.bigInt({ min: I64_MIN, max: I64_MAX }), nanos: fc.integer() }),
          ),
          { nil: undefined },
        ),
        fc.bigInt({ min: I64_MIN, max: I64_MAX }),
        anyU32,
        protocolArb,
        async (since, afterSequence, pageSize, protocol) => {
          // JSON cannot even express a timestamp outside 0001..9999: the client refuses to encode it.
          const unencodable =
            since !== undefined && (since.seconds < -62_135_596_800n || since.seconds > 253_402_300_799n || since.nanos < 0 || since.nanos > 999_999_999);
          if (protocol === "connect-json" && unencodable) protocol = "grpc";
          const res = await bounded(settle(proxy[protocol].getRailStatement({ since, afterSequence, pageSize })), CALL_BOUND_MS, "GetRailStatement");
          tally.recordSettled("GetRailStatement", res);
          if (res.ok) return;
          expectCleanError(
            res.error,
            { codes: [Code.InvalidArgument] },
            `GetRailStatement since=${JSON.stringify(since, bigintJson)} after=${afterSequence} size=${pageSize}`,
          );
        },
      ),
      { numRuns: runs(60) },
    );
  });
});

describe("regressions found by fuzzing", () => {
  // A token as ListUnresolved issues them (shared/domain/page-token.ts), holding the given position.
  const token = ([at, id]: [string, string]) => encodePageToken({ at, id }, "ListUnresolved");
  it.each([
    ['a cursor Date.parse accepts but PostgreSQL refuses ("0")', token(["0", "-"])],
    ["year 0000", token(["0000-12-31T23:59:59.999Z", "p"])],
    ["February 30", token(["2024-02-30 10:00:00.000001+00", "p"])],
    ["hour 24", token(["2024-01-01 24:00:00+00", "p"])],
  ])("ListUnresolved with a page token holding %s is PAGE_TOKEN_INVALID, not internal", async (_name, pageToken) => {
    for (const protocol of PROTOCOLS) {
      const res = await settle(proxy[protocol].listUnresolved({ pageToken }));
      expect(res.ok).toBe(false);
      if (!res.ok) expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["PAGE_TOKEN_INVALID"], field: "page_token" }, "ListUnresolved");
    }
  });

  it("a cursor in PostgreSQL's own format is still accepted", async () => {
    const res = await proxy.grpc.listUnresolved({ pageToken: token(["2024-01-01 10:00:00.123456+00", "p"]) });
    expect(res.submissions).toBeDefined();
  });

  it.each([
    ["past 9999-12-31", { seconds: 253_402_300_800n, nanos: 0 }],
    ["before 0001-01-01", { seconds: -62_135_596_801n, nanos: 0 }],
    ["nanos >= 1e9", { seconds: 0n, nanos: 2_000_500_000 }],
    ["negative nanos", { seconds: 0n, nanos: -1 }],
  ])("GetRailStatement with since %s is invalid_argument naming since (was: unavailable from an internal rail error)", async (_name, since) => {
    const res = await settle(proxy.grpc.getRailStatement({ since }));
    expect(res.ok).toBe(false);
    if (!res.ok) expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["TIMESTAMP_INVALID"], field: "since" }, "GetRailStatement");
  });
});

describe("after the fuzz runs", () => {
  it("the proxy still answers health SERVING and the invariant checker finds nothing paid wrongly", async () => {
    await expectServing(mesh.proxies[0]!.url);
    await expectServing(mesh.railStub.url);
    const check = await checkInvariants(meshCheckTarget(mesh));
    expect(check.violations).toEqual([]);
    expect(mesh.proxies[0]!.running).toBe(true);
    expect(mesh.allLines().filter((l) => l.includes('"level":"error"') || l.includes('"level":"fatal"'))).toEqual([]);
  });
});

async function railCalls(): Promise<bigint> {
  const { RailControlService } = await import("../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js");
  const control = pool.client(RailControlService, `http://127.0.0.1:${mesh.railStub.ready!.controlPort}`, "grpc");
  return (await control.getFaults({})).submitCalls;
}

function bigintJson(_k: string, v: unknown): unknown {
  return typeof v === "bigint" ? v.toString() : v;
}
