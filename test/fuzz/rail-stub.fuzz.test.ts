/**
 * Property-based hostile input for the rail stub (RailService, credentialed; RailControlService
 * on its control port) and for grpc.health.v1.Health (Check and Watch), over binary gRPC and
 * Connect JSON. Without the credential nothing reaches the ledger, whatever the body; with it,
 * invalid bodies are refused and book nothing.
 */
import { Code, type Client } from "@connectrpc/connect";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { RailControlService } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { testMesh } from "../support/test-mesh.js";
import { ClientPool, expectServing, PROTOCOLS, type Protocol } from "./fuzz-clients.js";
import {
  anyMoney,
  anyU32,
  hostileString,
  I64_MAX,
  I64_MIN,
  textViolation,
  textWithForbidden,
  validBeneficiary,
  validId,
  validMoney,
  type MoneyInit,
} from "./hostile.js";
import { bounded, expectCleanError, settle } from "./outcome.js";
import { raildbState } from "./state.js";
import { FuzzTally } from "./summary.js";
import { runs } from "../support/fast-check-seed.js";

const CALL_BOUND_MS = 10_000;
let mesh: Mesh;
let pool: ClientPool;
let rail: Record<Protocol, ReturnType<typeof railOf>>;
let control: Record<Protocol, ReturnType<typeof controlOf>>;
const tally = new FuzzTally("rail-stub");
const railOf = (url: string, p: Protocol) => pool.client(RailService, url, p);
const controlOf = (url: string, p: Protocol) => pool.client(RailControlService, url, p);
const protocolArb = fc.constantFrom(...PROTOCOLS);
const controlUrl = () => `http://127.0.0.1:${mesh.railStub.ready!.controlPort}`;

beforeAll(async () => {
  // No proxies: this file talks to the rail directly, as only the proxy may in production.
  mesh = testMesh({ proxies: 0 });
  await mesh.start();
  pool = new ClientPool();
  rail = { grpc: railOf(mesh.railStub.url, "grpc"), "connect-json": railOf(mesh.railStub.url, "connect-json") };
  control = { grpc: controlOf(controlUrl(), "grpc"), "connect-json": controlOf(controlUrl(), "connect-json") };
});

beforeEach(async () => {
  await control?.grpc.setFaults({ rules: [] });
});

afterAll(async () => {
  pool?.close();
  await mesh?.stop();
  tally.write();
  // Shrinking adds cases on failure; a passing run executes at least this many.
  expect(tally.total()).toBeGreaterThanOrEqual(400);
});

interface PaymentInit {
  clientReference: string;
  accountId: string;
  beneficiary: string;
  amount: MoneyInit | undefined;
}

const anyPayment: fc.Arbitrary<PaymentInit> = fc.record({
  clientReference: fc.oneof(validId, hostileString(200)),
  accountId: fc.oneof(validId, hostileString(200)),
  beneficiary: fc.oneof(validBeneficiary, hostileString(200)),
  amount: fc.oneof(validMoney, anyMoney),
});

/** The stub's own contract: it is a lax third party, but it refuses what it cannot book. */
function stubRefuses(p: PaymentInit): boolean {
  const badText = (v: string, max: number) => textViolation(v, 1, max);
  return (
    badText(p.clientReference, 128) ||
    badText(p.accountId, 128) ||
    badText(p.beneficiary, 256) ||
    !p.amount ||
    p.amount.amountMinor <= 0n ||
    !/^[A-Z]{3}$/.test(p.amount.currency)
  );
}

/** Authorization values that are not `Bearer <the credential>`. */
const wrongAuthorization = (credential: string) =>
  fc.oneof(
    fc.constant(undefined),
    fc.constantFrom(
      "",
      "Bearer",
      "Bearer ",
      `bearer ${credential}`,
      `Basic ${credential}`,
      credential,
      `Bearer ${credential}x`,
      `Bearer ${credential.slice(0, -1)}`,
      `Bearer  ${credential}`,
      `Bearer ${credential.toUpperCase()}`,
      `Token ${credential}`,
    ),
    fc.stringMatching(/^[!-~]{1,200}$/).map((s) => `Bearer ${s}`),
  );

describe("RailService without the credential", () => {
  it("every body, over both protocols, is unauthenticated (RAIL_CREDENTIAL_INVALID) and books nothing", async () => {
    const before = await raildbState(mesh.databases.raildb);
    const callsBefore = (await control.grpc.getFaults({})).submitCalls;
    await fc.assert(
      fc.asyncProperty(anyPayment, wrongAuthorization(mesh.credential), protocolArb, fc.boolean(), async (body, auth, protocol, list) => {
        const headers: Record<string, string> = auth === undefined ? {} : { authorization: auth };
        const call: Promise<unknown> = list ? rail[protocol].listPayments({}, { headers }) : rail[protocol].submitPayment(body, { headers });
        const res = await bounded(settle(call), CALL_BOUND_MS, "rail without credential");
        tally.recordSettled(list ? "ListPayments/no-credential" : "SubmitPayment/no-credential", res);
        expect(res.ok, "the rail answered a caller without its credential").toBe(false);
        if (!res.ok) {
          const ce = expectCleanError(res.error, { codes: [Code.Unauthenticated, Code.ResourceExhausted], reasons: ["RAIL_CREDENTIAL_INVALID"] }, "rail");
          expect(ce.rawMessage).not.toContain(mesh.credential);
        }
      }),
      { numRuns: runs(120) },
    );
    expect(await raildbState(mesh.databases.raildb)).toEqual(before);
    expect((await control.grpc.getFaults({})).submitCalls).toBe(callsBefore);
  });
});

describe("RailService with the credential", () => {
  const auth = () => ({ headers: { authorization: `Bearer ${mesh.credential}` } });

  it("a body the rail cannot book is invalid_argument and books nothing", async () => {
    const before = await raildbState(mesh.databases.raildb);
    await fc.assert(
      fc.asyncProperty(anyPayment.filter(stubRefuses), protocolArb, async (body, protocol) => {
        const res = await bounded(settle(rail[protocol].submitPayment(body, auth())), CALL_BOUND_MS, "SubmitPayment");
        tally.recordSettled("SubmitPayment/invalid", res);
        expect(res.ok).toBe(false);
        if (!res.ok) expectCleanError(res.error, { codes: [Code.InvalidArgument] }, "SubmitPayment");
      }),
      { numRuns: runs(80) },
    );
    expect(await raildbState(mesh.databases.raildb)).toEqual(before);
  });

  it("any body is booked exactly once or refused cleanly (hostile text never becomes an internal error)", async () => {
    await fc.assert(
      fc.asyncProperty(anyPayment, protocolArb, async (body, protocol) => {
        const before = await raildbState(mesh.databases.raildb);
        const res = await bounded(settle(rail[protocol].submitPayment(body, auth())), CALL_BOUND_MS, "SubmitPayment");
        tally.recordSettled("SubmitPayment/any", res);
        const after = await raildbState(mesh.databases.raildb);
        if (res.ok) {
          expect(res.value.railReference).toMatch(/^rr_/);
          expect(BigInt(after.payments!) - BigInt(before.payments!)).toBe(1n);
        } else {
          expectCleanError(
            res.error,
            { codes: [Code.InvalidArgument] },
            `SubmitPayment ${JSON.stringify(body, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)).slice(0, 200)}`,
          );
          expect(after).toEqual(before);
        }
      }),
      { numRuns: runs(60) },
    );
  });

  it("ListPayments with any since / after_sequence / page size: a page or invalid_argument", async () => {
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
        async (since, afterSequence, pageSize) => {
          // gRPC only: Connect JSON cannot encode a timestamp outside 0001..9999 (the client refuses).
          const res = await bounded(settle(rail.grpc.listPayments({ since, afterSequence, pageSize }, auth())), CALL_BOUND_MS, "ListPayments");
          tally.recordSettled("ListPayments", res);
          if (!res.ok) expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["PAGE_SIZE_INVALID", "TIMESTAMP_INVALID"] }, "ListPayments");
        },
      ),
      { numRuns: runs(60) },
    );
  });

  it("a client_reference, account or beneficiary with a control, bidi or invisible character is FIELD_INVALID naming it, and books nothing", async () => {
    const before = await raildbState(mesh.databases.raildb);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("client_reference", "account_id", "beneficiary"), textWithForbidden(100), protocolArb, async (field, text, protocol) => {
        const body = { clientReference: "ref-text", accountId: "acc-1", beneficiary: "ben", amount: { amountMinor: 1n, currency: "EUR" } };
        const key = field === "client_reference" ? "clientReference" : field === "account_id" ? "accountId" : "beneficiary";
        const res = await bounded(settle(rail[protocol].submitPayment({ ...body, [key]: text }, auth())), CALL_BOUND_MS, "SubmitPayment");
        tally.recordSettled("SubmitPayment/forbidden-text", res);
        expect(res.ok, `booked ${field}=${JSON.stringify(text)}`).toBe(false);
        if (!res.ok)
          expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["FIELD_INVALID"], field }, `SubmitPayment ${field}=${JSON.stringify(text)}`);
      }),
      { numRuns: runs(40) },
    );
    expect(await raildbState(mesh.databases.raildb)).toEqual(before);
  });

  it("regression: a NUL byte in a text field is invalid_argument naming it, not an internal error, and books nothing", async () => {
    const before = await raildbState(mesh.databases.raildb);
    for (const [field, patch] of [
      ["client_reference", { clientReference: "\u0000" }],
      ["account_id", { accountId: "acc\u00001" }],
      ["beneficiary", { beneficiary: "\u0000" }],
    ] as const) {
      const body = { clientReference: "ref-nul", accountId: "acc-1", beneficiary: "ben", amount: { amountMinor: 1n, currency: "EUR" }, ...patch };
      const res = await settle(rail.grpc.submitPayment(body, auth()));
      expect(res.ok).toBe(false);
      if (!res.ok) expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["FIELD_INVALID"], field }, "SubmitPayment NUL");
    }
    expect(await raildbState(mesh.databases.raildb)).toEqual(before);
  });

  it("regression: a since past 9999-12-31 is TIMESTAMP_INVALID, not an internal error", async () => {
    const res = await settle(rail.grpc.listPayments({ since: { seconds: 8_639_999_999_998n, nanos: 0 } }, auth()));
    expect(res.ok).toBe(false);
    if (!res.ok) expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["TIMESTAMP_INVALID"], field: "since" }, "ListPayments");
  });
});

describe("RailControlService", () => {
  it("SetFaults with any rules: accepted (and readable back) or invalid_argument naming the rule", async () => {
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              kind: fc.oneof(fc.constantFrom(0, 1, 2, 3, 4), fc.integer()),
              latencyMs: anyU32,
              count: anyU32,
              clientReferencePrefix: hostileString(300),
            }),
            { maxLength: 20 },
          ),
          protocolArb,
          async (rules, protocol) => {
            const res = await bounded(settle(control[protocol].setFaults({ rules })), CALL_BOUND_MS, "SetFaults");
            tally.recordSettled("SetFaults", res);
            if (res.ok) {
              expect((await control[protocol].getFaults({})).rules).toHaveLength(rules.length);
            } else {
              expectCleanError(res.error, { codes: [Code.InvalidArgument, Code.ResourceExhausted] }, "SetFaults");
            }
            tally.recordSettled("GetFaults", await settle(control[protocol].getFaults({})));
          },
        ),
        { numRuns: runs(50) },
      );
    } finally {
      await control.grpc.setFaults({ rules: [] });
    }
  });
});

describe("grpc.health.v1.Health", () => {
  it("Check with any service name: a status or not_found; Watch sends a first status and ends when the caller leaves", async () => {
    const urls = () => [mesh.railStub.url, controlUrl()];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom("", RailService.typeName, RailControlService.typeName), hostileString(3000)),
        protocolArb,
        fc.boolean(),
        fc.nat(1),
        async (service, protocol, watch, which) => {
          // A session per case, closed with it: at hostile scale (thousands of cases) sessions
          // left open until the file ends pile up in the test process, not in the server.
          const casePool = new ClientPool();
          try {
            await healthCase(casePool.client(Health, urls()[which]!, protocol), service, watch);
          } finally {
            casePool.close();
          }
        },
      ),
      { numRuns: runs(60) },
    );
  });
});

async function healthCase(health: Client<typeof Health>, service: string, watch: boolean): Promise<void> {
  if (!watch) {
    const res = await bounded(settle(health.check({ service })), CALL_BOUND_MS, "Health.Check");
    tally.recordSettled("Health.Check", res);
    if (!res.ok)
      expectCleanError(res.error, { codes: [Code.NotFound, Code.InvalidArgument], reasons: ["SERVICE_UNKNOWN", "REQUEST_TOO_LARGE"] }, "Health.Check");
    return;
  }
  const abort = new AbortController();
  const res = await bounded(
    settle(
      (async () => {
        for await (const m of health.watch({ service }, { signal: abort.signal })) {
          abort.abort();
          return m.status;
        }
        return undefined;
      })(),
    ),
    CALL_BOUND_MS,
    "Health.Watch",
  );
  tally.recordSettled("Health.Watch", res);
  if (res.ok) expect(Object.values(HealthCheckResponse_ServingStatus)).toContain(res.value);
  else if (abort.signal.aborted) expectCleanError(res.error, { codes: [Code.Canceled], requireInfo: false }, "Health.Watch cancelled by the client");
  else expectCleanError(res.error, { codes: [Code.InvalidArgument], reasons: ["REQUEST_TOO_LARGE"] }, "Health.Watch");
}

describe("after the fuzz runs", () => {
  it("the rail stub (both ports) still answers health SERVING and logged no internal error", async () => {
    await expectServing(mesh.railStub.url);
    await expectServing(controlUrl());
    expect(mesh.railStub.running).toBe(true);
    expect(mesh.railStub.lines.filter((l) => l.includes('"level":"error"') || l.includes('"level":"fatal"'))).toEqual([]);
  });
});
