/**
 * SPEC C3 §3.5, row by row, against real processes: rail-stub + two rail-proxy replicas on a
 * real paydb. Every rejection must leave paydb and the rail exactly as they were.
 *
 * Submissions are made as the payout's holder makes them: the payout exists and is fenced by
 * the request's token (fencedFor), so the payout binding (§3.9) admits it and the step under
 * test is what refuses.
 */
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { connectClient, db, expectRejected, metricValue, proxyClient, railBookings, railControl } from "../support/clients.js";
import { fencedFor, fencePayout } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";

let mesh: Mesh;
let paydb: pg.Client;
let raildb: pg.Client;
let proxyA: ReturnType<typeof proxyClient>;
let proxyB: ReturnType<typeof proxyClient>;
let seq = 0;
const uid = (p: string) => `${p}-${Date.now().toString(36)}-${++seq}`;

const request = (accountId: string, payoutId: string, token: bigint, amountMinor = 1050n) => ({
  accountId,
  payoutId,
  fencingToken: token,
  amount: { amountMinor, currency: "EUR" },
  beneficiary: "ben-001",
});

async function snapshot(accountId: string) {
  const mark = await paydb.query("SELECT mark FROM rail_high_water WHERE account_id = $1", [accountId]);
  const subs = await paydb.query("SELECT payout_id, state FROM rail_submissions WHERE account_id = $1 ORDER BY payout_id", [accountId]);
  const rail = await raildb.query("SELECT count(*)::int AS n FROM payments WHERE account_id = $1", [accountId]);
  const calls = (await railControl(mesh).getFaults({})).submitCalls;
  return { mark: mark.rows, subs: subs.rows, railPayments: rail.rows[0].n as number, railCalls: calls };
}

beforeAll(async () => {
  mesh = testMesh({ proxies: 2 });
  await mesh.start();
  paydb = await db(mesh.dbUrl("paydb"));
  raildb = await db(mesh.databases.raildb);
  proxyA = proxyClient(mesh.proxies[0]!.url);
  proxyB = proxyClient(mesh.proxies[1]!.url);
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

describe("step 0: invalid requests are refused before anything is written", () => {
  const acc = "acc-invalid";
  const cases: Array<[string, Record<string, unknown>, string, string]> = [
    ["empty account", { accountId: "" }, "account_id", "FIELD_REQUIRED"],
    ["account with a space", { accountId: "acc 1" }, "account_id", "FIELD_INVALID"],
    ["unicode confusable account", { accountId: "\u0430cc-1" }, "account_id", "FIELD_INVALID"],
    ["oversized account", { accountId: "a".repeat(65) }, "account_id", "FIELD_INVALID"],
    ["empty payout id", { payoutId: "" }, "payout_id", "FIELD_REQUIRED"],
    ["token 0", { fencingToken: 0n }, "fencing_token", "TOKEN_INVALID"],
    ["token above 2^63-1", { fencingToken: 1n << 63n }, "fencing_token", "TOKEN_INVALID"],
    ["missing amount", { amount: undefined }, "amount", "FIELD_REQUIRED"],
    ["zero amount", { amount: { amountMinor: 0n, currency: "EUR" } }, "amount.amount_minor", "AMOUNT_INVALID"],
    ["negative amount", { amount: { amountMinor: -5n, currency: "EUR" } }, "amount.amount_minor", "AMOUNT_INVALID"],
    ["absurd amount", { amount: { amountMinor: 10n ** 16n, currency: "EUR" } }, "amount.amount_minor", "AMOUNT_INVALID"],
    ["unknown currency", { amount: { amountMinor: 5n, currency: "XYZ" } }, "amount.currency", "CURRENCY_INVALID"],
    ["lower-case currency", { amount: { amountMinor: 5n, currency: "eur" } }, "amount.currency", "CURRENCY_INVALID"],
    ["empty beneficiary", { beneficiary: "" }, "beneficiary", "FIELD_REQUIRED"],
    ["oversized beneficiary", { beneficiary: "b".repeat(129) }, "beneficiary", "FIELD_INVALID"],
  ];
  it.each(cases)("%s -> invalid_argument naming the field", async (_name, patch, field, reason) => {
    const before = await snapshot(acc);
    const err = await expectRejected(proxyA.submitPayout({ ...request(acc, uid("p"), 5n), ...patch }), Code.InvalidArgument, reason);
    const { errorInfo } = await import("../../services/shared/domain/errors.js");
    expect(errorInfo(err)?.domain).toBe("railfence.dev");
    expect(errorInfo(err)?.metadata.field).toBe(field);
    expect(await snapshot(acc)).toEqual(before);
  });

  it("an oversized message is refused with invalid_argument REQUEST_TOO_LARGE", async () => {
    const before = await snapshot(acc);
    await expectRejected(proxyA.submitPayout({ ...request(acc, uid("p"), 5n), beneficiary: "x".repeat(64 * 1024) }), Code.InvalidArgument, "REQUEST_TOO_LARGE");
    expect(await snapshot(acc)).toEqual(before);
  });
});

describe("step 1: fencing", () => {
  it("admits a token above the mark, advances the mark and forwards once", async () => {
    const acc = uid("acc");
    const p = uid("p");
    const res = await proxyA.submitPayout(await fencedFor(paydb, request(acc, p, 10n)));
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(res.submission?.railReference).toMatch(/^rr_/);
    const s = await snapshot(acc);
    expect(s.mark).toEqual([{ mark: "10" }]);
    expect(await railBookings(raildb, p)).toBe(1);
  });

  it.each([
    ["equal to the mark", 10n],
    ["below the mark", 9n],
  ])("a token %s is FENCED_OUT, changes nothing and never reaches the rail", async (_n, stale) => {
    const acc = uid("acc");
    await proxyA.submitPayout(await fencedFor(paydb, request(acc, uid("p"), 10n)));
    const before = await snapshot(acc);
    const fencedBefore = await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_fenced_out_total");
    const p = uid("p");
    await expectRejected(proxyB.submitPayout(await fencedFor(paydb, request(acc, p, stale))), Code.Aborted, "FENCED_OUT");
    expect(await snapshot(acc)).toEqual(before);
    expect(await railBookings(raildb, p)).toBe(0);
    expect(await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_fenced_out_total")).toBe((fencedBefore ?? 0) + 1);
  });

  it("a stale token sent to the replica that never saw the higher one is FENCED_OUT (ADR-007 failure ii)", async () => {
    const acc = uid("acc");
    await proxyA.submitPayout(await fencedFor(paydb, request(acc, uid("p"), 90n)));
    const p = uid("p");
    await expectRejected(proxyB.submitPayout(await fencedFor(paydb, request(acc, p, 41n))), Code.Aborted, "FENCED_OUT");
    expect(await railBookings(raildb, p)).toBe(0);
  });

  it("the database refuses to lower or delete a mark, whoever asks (INV-05)", async () => {
    const acc = uid("acc");
    await proxyA.submitPayout(await fencedFor(paydb, request(acc, uid("p"), 7n)));
    await expect(paydb.query("UPDATE rail_high_water SET mark = 3 WHERE account_id = $1", [acc])).rejects.toThrow(/must increase/);
    await expect(paydb.query("UPDATE rail_high_water SET mark = 7 WHERE account_id = $1", [acc])).rejects.toThrow(/must increase/);
    await expect(paydb.query("DELETE FROM rail_high_water WHERE account_id = $1", [acc])).rejects.toThrow(/never deleted/);
    await expect(paydb.query("TRUNCATE rail_high_water")).rejects.toThrow(/never truncated/);
    expect((await snapshot(acc)).mark).toEqual([{ mark: "7" }]);
  });
});

/**
 * The first submission here is one the rail refuses: its payout stays PROCESSING (no executor runs
 * in this file to record FAILED), so it can be fenced again and the second submission reaches the
 * primary key. One the rail accepted closes its payout PAID (decision 072), and the binding
 * refuses any second submission before the primary key is asked (the last test here).
 */
async function refusedFirst(acc: string, p: string, token: bigint): Promise<void> {
  await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.REJECT, latencyMs: 0, count: 1, clientReferencePrefix: p }] });
  const first = await proxyA.submitPayout(await fencedFor(paydb, request(acc, p, token)));
  expect(first.submission?.state).toBe(SubmissionState.REJECTED);
}

describe("step 2: duplicates", () => {
  it("a second submission of a payout is DUPLICATE_SUBMISSION, counted, and the mark is not advanced", async () => {
    const acc = uid("acc");
    const p = uid("p");
    await refusedFirst(acc, p, 5n);
    const before = await snapshot(acc);
    const dupBefore = (await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_duplicate_attempted_total")) ?? 0;
    await expectRejected(proxyB.submitPayout(await fencedFor(paydb, request(acc, p, 6n))), Code.AlreadyExists, "DUPLICATE_SUBMISSION");
    expect(await snapshot(acc)).toEqual(before); // mark still 5: the whole transaction rolled back
    expect(await railBookings(raildb, p)).toBe(0); // the rail was called once, and refused it
    expect(await metricValue(mesh.proxies[1]!.ready!.metricsPort, "railfence_rail_proxy_duplicate_attempted_total")).toBe(dupBefore + 1);
  });

  it("a duplicate with a stale token is FENCED_OUT first (fixed admission order)", async () => {
    const acc = uid("acc");
    const p = uid("p");
    await refusedFirst(acc, p, 5n);
    await expectRejected(proxyA.submitPayout(await fencedFor(paydb, request(acc, p, 5n))), Code.Aborted, "FENCED_OUT");
  });

  it("a second submission of a payout the rail accepted is refused by the binding: the payout is PAID (decision 072)", async () => {
    const acc = uid("acc");
    const p = uid("p");
    const first = await proxyA.submitPayout(await fencedFor(paydb, request(acc, p, 5n)));
    expect(first.payoutClosed).toBe(true);
    const before = await snapshot(acc);
    await expectRejected(proxyB.submitPayout(request(acc, p, 6n)), Code.FailedPrecondition, "PAYOUT_NOT_PAYABLE");
    expect(await snapshot(acc)).toEqual(before); // mark still 5
    expect(await railBookings(raildb, p)).toBe(1);
  });
});

describe("concurrency", () => {
  it("50 concurrent submissions for one account: each admitted one forwarded once, admitted tokens increase, final mark = highest admitted", async () => {
    const acc = uid("acc");
    const tokens = Array.from({ length: 50 }, (_, i) => BigInt(i + 1)).sort(() => Math.random() - 0.5);
    const requests = tokens.map((t) => request(acc, `${acc}-p${t}`, t));
    // Every payout fenced first, so the submissions themselves race and only the mark decides.
    for (const req of requests) await fencedFor(paydb, req);
    const results = await Promise.allSettled(requests.map((req, i) => (i % 2 ? proxyA : proxyB).submitPayout(req)));
    const admitted = tokens.filter((_, i) => results[i]!.status === "fulfilled");
    const rejected = results.filter((r) => r.status === "rejected");
    for (const r of rejected) expect((r as PromiseRejectedResult).reason.rawMessage).toMatch(/high-water mark/);
    expect(admitted.length).toBeGreaterThan(0);
    for (const t of tokens) expect(await railBookings(raildb, `${acc}-p${t}`)).toBe(admitted.includes(t) ? 1 : 0);
    // The database's own history: every advance raised the mark, in admission order.
    const log = await paydb.query<{ old_mark: string | null; new_mark: string }>(
      "SELECT old_mark, new_mark FROM rail_high_water_log WHERE account_id = $1 ORDER BY id",
      [acc],
    );
    const advances = log.rows.map((r) => BigInt(r.new_mark));
    expect(advances.map(String)).toEqual([...advances].sort((a, b) => (a < b ? -1 : 1)).map(String));
    expect(new Set(advances.map(String))).toEqual(new Set(admitted.map(String)));
    const { rows } = await paydb.query("SELECT mark FROM rail_high_water WHERE account_id = $1", [acc]);
    expect(rows[0].mark).toBe("50");
  });

  it("20 concurrent submissions of the same payout with increasing tokens: exactly one forward", async () => {
    const acc = uid("acc");
    const p = uid("p");
    // Twenty holders racing, as executors taking the payout over one after another would: each
    // fences the payout with its token (a fence only ever rises) on a connection of its own and
    // submits at once, whatever the fence says by then.
    const holders = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 20 });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, async (_, i) => {
        const req = request(acc, p, BigInt(i + 1));
        await fencePayout(holders, req);
        return (i % 2 ? proxyA : proxyB).submitPayout(req);
      }),
    ).finally(() => holders.end());
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(await railBookings(raildb, p)).toBe(1);
    const { rows } = await paydb.query("SELECT count(*)::int AS n FROM rail_submissions WHERE payout_id = $1", [p]);
    expect(rows[0].n).toBe(1);
  });
});

describe("reads and resolution", () => {
  it("GetSubmission returns the intent row; an unknown payout is NOT_FOUND", async () => {
    const acc = uid("acc");
    const p = uid("p");
    await proxyA.submitPayout(await fencedFor(paydb, request(acc, p, 3n)));
    const got = await proxyB.getSubmission({ payoutId: p });
    expect(got.submission).toMatchObject({
      payoutId: p,
      accountId: acc,
      fencingToken: 3n,
      state: SubmissionState.ACCEPTED,
      ambiguous: false,
      replicaId: "rail-proxy-1",
    });
    await expectRejected(proxyB.getSubmission({ payoutId: uid("nope") }), Code.NotFound, "SUBMISSION_NOT_FOUND");
  });

  it("only ambiguous submissions can be resolved", async () => {
    const acc = uid("acc");
    const p = uid("p");
    await proxyA.submitPayout(await fencedFor(paydb, request(acc, p, 3n)));
    await expectRejected(
      proxyA.resolveSubmission({ payoutId: p, outcome: 1, actor: "operator:alice", note: "x", railReference: "rr_x" }),
      Code.FailedPrecondition,
      "NOT_AMBIGUOUS",
    );
    await expectRejected(proxyA.resolveSubmission({ payoutId: p, outcome: 1, actor: "operator:alice", note: "x" }), Code.InvalidArgument, "FIELD_REQUIRED");
    await expectRejected(proxyA.resolveSubmission({ payoutId: p, outcome: 0, actor: "operator:alice", note: "x" }), Code.InvalidArgument, "FIELD_INVALID");
    await expectRejected(proxyA.resolveSubmission({ payoutId: p, outcome: 1, actor: "", note: "x" }), Code.InvalidArgument, "FIELD_REQUIRED");
    await expectRejected(proxyA.listUnresolved({ pageToken: "garbage" }), Code.InvalidArgument, "PAGE_TOKEN_INVALID");
  });
});

describe("the rail credential", () => {
  it("the rail refuses calls without or with a wrong credential", async () => {
    const { RailService } = await import("../../services/shared/gen/railfence/rail/v1/rail_pb.js");
    const rail = connectClient(RailService, mesh.railStub.url);
    const req = { clientReference: uid("p"), accountId: "a", beneficiary: "b", amount: { amountMinor: 1n, currency: "EUR" } };
    await expectRejected(rail.submitPayment(req), Code.Unauthenticated, "RAIL_CREDENTIAL_INVALID");
    await expectRejected(rail.submitPayment(req, { headers: { authorization: "Bearer wrong" } }), Code.Unauthenticated, "RAIL_CREDENTIAL_INVALID");
    await expectRejected(rail.listPayments({}, { headers: { authorization: `Basic ${mesh.credential}` } }), Code.Unauthenticated);
    expect(await railBookings(raildb, req.clientReference)).toBe(0);
  });

  it("never appears in any log line of any process", () => {
    const lines = mesh.allLines();
    expect(lines.length).toBeGreaterThan(10);
    expect(lines.filter((l) => l.includes(mesh.credential))).toEqual([]);
  });
});
