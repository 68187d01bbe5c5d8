/**
 * The proxy checks what it pays (SPEC C3 §3.9): a submission is admitted only for a payout that
 * exists in paydb, belongs to the account, is being paid (PROCESSING), has the same amount,
 * currency and beneficiary, is fenced by the very token presented, and has no other live
 * submission — whatever reference the caller presents. Without this, anyone holding an executor
 * certificate could take a token and pay anything to anyone under a fresh payout id.
 *
 * Every refusal is a clean Connect error with its own reason and changes nothing: no mark
 * advance, no intent, no rail call.
 */
import { Code } from "@connectrpc/connect";
import { beforeAll, describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { eventually, expectRejected, proxyClient, railControl } from "../support/clients.js";
import { insertPayouts, setFaults } from "../executor/support.js";

let proxy: ReturnType<typeof proxyClient>;

const t = useMesh({ proxies: 1 });

beforeAll(async () => {
  proxy = proxyClient(t.mesh.proxies[0]!.url);
});

const AMOUNT = 2500n;
const BENEFICIARY = "ben-honest";

/** A payout as an honest executor leaves it right before SubmitPayout: PROCESSING, fenced by `token`. */
async function fenced(payoutId: string, accountId: string, token: bigint, state = "PROCESSING"): Promise<void> {
  await insertPayouts(t.paydb, [{ payoutId, accountId, amountMinor: AMOUNT, beneficiary: BENEFICIARY }]);
  await t.paydb.query("UPDATE payouts SET fence = $2, state = $3 WHERE payout_id = $1", [payoutId, token.toString(), state]);
}

const request = (accountId: string, payoutId: string, token: bigint, over: Record<string, unknown> = {}) => ({
  accountId,
  payoutId,
  fencingToken: token,
  amount: { amountMinor: AMOUNT, currency: "EUR" },
  beneficiary: BENEFICIARY,
  ...over,
});

async function snapshot(accountId: string) {
  const mark = await t.paydb.query("SELECT mark::text FROM rail_high_water WHERE account_id = $1", [accountId]);
  const subs = await t.paydb.query("SELECT payout_id, state FROM rail_submissions WHERE account_id = $1 ORDER BY payout_id", [accountId]);
  const rail = await t.raildb.query("SELECT count(*)::int AS n FROM payments WHERE account_id = $1", [accountId]);
  const calls = (await railControl(t.mesh).getFaults({})).submitCalls;
  return { mark: mark.rows, subs: subs.rows, railPayments: rail.rows[0].n as number, railCalls: calls };
}

describe("the proxy binds every submission to its payout", () => {
  it("a fresh payout id that paydb does not know (a rogue executor paying anyone) is refused: BOUND_PAYOUT_NOT_FOUND", async () => {
    const acc = "acc-bind-rogue";
    const before = await snapshot(acc);
    await expectRejected(
      proxy.submitPayout(request(acc, "po-made-up", 9n, { amount: { amountMinor: 999_999_900n, currency: "EUR" }, beneficiary: "ben-attacker" })),
      Code.FailedPrecondition,
      "BOUND_PAYOUT_NOT_FOUND",
    );
    expect(await snapshot(acc)).toEqual(before);
  });

  it.each([
    ["amount", { amount: { amountMinor: 999_999_900n, currency: "EUR" } }, "amount_minor"],
    ["currency", { amount: { amountMinor: AMOUNT, currency: "USD" } }, "currency"],
    ["beneficiary", { beneficiary: "ben-attacker" }, "beneficiary"],
  ])("a request whose %s differs from the payout is refused: PAYOUT_MISMATCH", async (what, over, field) => {
    const acc = `acc-bind-${what}`;
    const payoutId = `po-bind-${what}`;
    await fenced(payoutId, acc, 5n);
    const before = await snapshot(acc);
    const err = await expectRejected(proxy.submitPayout(request(acc, payoutId, 5n, over)), Code.FailedPrecondition, "PAYOUT_MISMATCH");
    expect(errorInfo(err)?.metadata.field).toBe(field);
    expect(await snapshot(acc)).toEqual(before);
  });

  it("a payout of another account is refused: PAYOUT_MISMATCH on account_id", async () => {
    await fenced("po-bind-other-account", "acc-bind-owner", 5n);
    const before = await snapshot("acc-bind-thief");
    const err = await expectRejected(proxy.submitPayout(request("acc-bind-thief", "po-bind-other-account", 5n)), Code.FailedPrecondition, "PAYOUT_MISMATCH");
    expect(errorInfo(err)?.metadata.field).toBe("account_id");
    expect(await snapshot("acc-bind-thief")).toEqual(before);
  });

  it.each([
    ["a newer holder fenced it", 7n, 6n],
    ["nobody fenced it with this token", 4n, 6n],
  ])("a token other than the payout's fence is refused (%s): PAYOUT_FENCE_MISMATCH", async (_what, fence, token) => {
    const acc = `acc-bind-fence-${fence}`;
    const payoutId = `po-bind-fence-${fence}`;
    await fenced(payoutId, acc, fence);
    const before = await snapshot(acc);
    await expectRejected(proxy.submitPayout(request(acc, payoutId, token)), Code.FailedPrecondition, "PAYOUT_FENCE_MISMATCH");
    expect(await snapshot(acc)).toEqual(before);
  });

  it.each(["PENDING", "PAID", "FAILED", "UNKNOWN"])("a payout in state %s is refused: PAYOUT_NOT_PAYABLE", async (state) => {
    const acc = `acc-bind-state-${state.toLowerCase()}`;
    const payoutId = `po-bind-state-${state.toLowerCase()}`;
    await fenced(payoutId, acc, 5n, state);
    const before = await snapshot(acc);
    const err = await expectRejected(proxy.submitPayout(request(acc, payoutId, 5n)), Code.FailedPrecondition, "PAYOUT_NOT_PAYABLE");
    expect(errorInfo(err)?.metadata.state).toBe(state);
    expect(await snapshot(acc)).toEqual(before);
  });

  it("an attempt reference whose token is not the fencing token is refused", async () => {
    const acc = "acc-bind-suffix";
    await fenced("po-bind-suffix", acc, 5n);
    const before = await snapshot(acc);
    const err = await expectRejected(proxy.submitPayout(request(acc, "po-bind-suffix:t6", 5n)), Code.InvalidArgument, "FIELD_INVALID");
    expect(errorInfo(err)?.metadata.field).toBe("payout_id");
    expect(await snapshot(acc)).toEqual(before);
  });

  it("a second live submission of one payout under another reference is refused: PAYOUT_ALREADY_SUBMITTED names the live one", async () => {
    const acc = "acc-bind-live";
    const payoutId = "po-bind-live";
    await fenced(payoutId, acc, 5n);
    // The first attempt stays in flight: the rail never answers it.
    await setFaults(t.mesh, [{ kind: FaultKind.NEVER_LAND_HANG, latencyMs: 0, count: 1, clientReferencePrefix: `${payoutId}:t5` }]);
    const first = proxy.submitPayout(request(acc, `${payoutId}:t5`, 5n)).catch((e: unknown) => e);
    // The first attempt's intent is committed (it was admitted under fence 5) before anyone re-fences.
    await eventually(
      async () => (await t.paydb.query("SELECT 1 FROM rail_submissions WHERE payout_id = $1", [`${payoutId}:t5`])).rowCount,
      "the first attempt's intent",
    );
    // A takeover: a newer token fences the payout and submits under a fresh reference.
    await t.paydb.query("UPDATE payouts SET fence = 6 WHERE payout_id = $1", [payoutId]);
    const before = await snapshot(acc);
    const err = await expectRejected(proxy.submitPayout(request(acc, `${payoutId}:t6`, 6n)), Code.AlreadyExists, "PAYOUT_ALREADY_SUBMITTED");
    expect(errorInfo(err)?.metadata.live_submission).toBe(`${payoutId}:t5`);
    expect(await snapshot(acc)).toEqual(before);
    await first;
    await setFaults(t.mesh, []);
  });

  it("a payout whose earlier submission was never forwarded can be submitted again, and is paid once", async () => {
    const acc = "acc-bind-retry";
    const payoutId = "po-bind-retry";
    await fenced(payoutId, acc, 5n);
    // An earlier attempt that the proxy gave up before calling the rail.
    await t.paydb.query(
      `INSERT INTO rail_submissions (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id, mark_advanced)
       VALUES ($1, $2, $3, 4, $4, 'EUR', $5, 'FORWARDING', 'test', true)`,
      [`${payoutId}:t4`, payoutId, acc, AMOUNT.toString(), BENEFICIARY],
    );
    await t.paydb.query("UPDATE rail_submissions SET state = 'NOT_FORWARDED' WHERE payout_id = $1", [`${payoutId}:t4`]);
    const before = await snapshot(acc);
    expect(before.railPayments).toBe(0);
    const res = await proxy.submitPayout(request(acc, `${payoutId}:t5`, 5n));
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(res.submission?.boundPayoutId).toBe(payoutId);
    // Paid once: the rail booked exactly this submission, under its reference, and nothing else.
    const { rows } = await t.raildb.query<{ client_reference: string; status: string }>("SELECT client_reference, status FROM payments WHERE account_id = $1", [
      acc,
    ]);
    expect(rows).toEqual([{ client_reference: `${payoutId}:t5`, status: "ACCEPTED" }]);
    expect((await snapshot(acc)).railCalls - before.railCalls).toBe(1n);
  });
});
