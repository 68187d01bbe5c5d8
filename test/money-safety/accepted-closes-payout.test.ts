/**
 * The rail's ACCEPTED closes its payout in the statement that records it (decision 072): one writer
 * per fact, as a PAID resolution already was (decision 066). The answer says so
 * (payout_closed), and the executor then writes nothing: one commit fewer per payout.
 *
 * The rule is the PAID resolution's: an open payout becomes PAID whatever its fence (the rail paid
 * this payout through this submission; a newer holder's fence does not undo that), a FAILED one
 * goes to a human, and the closing never refuses, so it never takes the rail's answer down with
 * it. The executor side, and its negative controls, are in executor-closed.test.ts.
 */
import { describe, expect, it } from "vitest";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { insertPayouts, setFaults } from "../executor/support.js";
import { eventually, proxyClient } from "../support/clients.js";
import { fencedByExecutor } from "../support/fenced-payout.js";
import { useMesh } from "../support/use-mesh.js";

const t = useMesh({ proxies: 1 });
const proxy = () => proxyClient(t.mesh.proxies[0]!.url);
let seq = 0;

/** A PROCESSING payout fenced by `token`, as its holder leaves it right before SubmitPayout. */
async function held(token = 3n) {
  const payoutId = `po-accepted-${++seq}`;
  const accountId = `acc-accepted-${seq}`;
  await insertPayouts(t.paydb, [{ payoutId, accountId, amountMinor: 5100n, beneficiary: "ben-accepted" }]);
  await fencedByExecutor(t.paydb, payoutId, token, "executor-a");
  const request = { accountId, payoutId, fencingToken: token, amount: { amountMinor: 5100n, currency: "EUR" }, beneficiary: "ben-accepted" };
  return { payoutId, request };
}

async function payout(id: string) {
  const { rows } = await t.paydb.query<{
    state: string;
    fence: string;
    rail_reference: string | null;
    submission_ref: string | null;
    claimed_by: string | null;
    attention_reason: string | null;
  }>("SELECT state, fence::text, rail_reference, submission_ref, claimed_by, attention_reason FROM payouts WHERE payout_id = $1", [id]);
  return rows[0]!;
}

/** Who wrote the payout's last change (payout_history records the login, migration 013). */
async function lastWriter(id: string): Promise<{ new_state: string; changed_by: string }> {
  const { rows } = await t.paydb.query<{ new_state: string; changed_by: string }>(
    "SELECT new_state, changed_by FROM payout_history WHERE payout_id = $1 ORDER BY id DESC LIMIT 1",
    [id],
  );
  return rows[0]!;
}

/** Waits until the proxy holds the submission FORWARDING (its call to the rail is out). */
async function forwarding(reference: string): Promise<void> {
  await eventually(async () => {
    const { rows } = await t.paydb.query<{ state: string }>("SELECT state FROM rail_submissions WHERE payout_id = $1", [reference]);
    return rows[0]?.state === "FORWARDING" ? true : undefined;
  }, `${reference} is being forwarded`);
}

describe("the rail's ACCEPTED closes its payout in the same statement (decision 072)", () => {
  it("PAID, with the rail's reference and the submission that paid it, written by the proxy's login; the answer says payout_closed", async () => {
    const { payoutId, request } = await held();
    const res = await proxy().submitPayout(request);
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(res.payoutClosed).toBe(true);
    expect(await payout(payoutId)).toMatchObject({
      state: "PAID",
      fence: "3",
      rail_reference: res.submission!.railReference,
      submission_ref: payoutId,
      claimed_by: null,
    });
    const writer = await lastWriter(payoutId);
    expect(writer.new_state).toBe("PAID");
    expect(writer.changed_by).toMatch(/rail_proxy/);
  });

  it("a newer holder fenced the payout while the rail was paying it: PAID all the same (the rail paid this payout)", async () => {
    const { payoutId, request } = await held(3n);
    await setFaults(t.mesh, [{ kind: FaultKind.LATENCY, latencyMs: 1500, count: 1, clientReferencePrefix: payoutId }]);
    const answer = proxy().submitPayout(request);
    await forwarding(payoutId);
    await fencedByExecutor(t.paydb, payoutId, 4n, "executor-b");
    const res = await answer;
    expect(res.payoutClosed).toBe(true);
    expect(await payout(payoutId)).toMatchObject({ state: "PAID", fence: "4", rail_reference: res.submission!.railReference });
  });

  it("a payout FAILED meanwhile goes to a human (PAID_BUT_FAILED), and the rail's ACCEPTED is recorded all the same", async () => {
    const { payoutId, request } = await held(3n);
    await setFaults(t.mesh, [{ kind: FaultKind.LATENCY, latencyMs: 1500, count: 1, clientReferencePrefix: payoutId }]);
    const answer = proxy().submitPayout(request);
    await forwarding(payoutId);
    // What a compromised executor's role can do to a payout it holds: fail it.
    const failed = await t
      .roleDb("paydb", "executor")
      .query(
        "UPDATE payouts SET state = 'FAILED', failure_reason = 'RAIL_REJECTED', claimed_by = NULL, claimed_until = NULL WHERE payout_id = $1 AND fence <= 3",
        [payoutId],
      );
    expect(failed.rowCount).toBe(1);
    const res = await answer;
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(res.payoutClosed).toBe(false);
    expect((await proxy().getSubmission({ payoutId })).submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(await payout(payoutId)).toMatchObject({ state: "NEEDS_ATTENTION", attention_reason: "PAID_BUT_FAILED" });
  });

  it("a payout already closed is left as it is, and the answer does not claim to have closed it", async () => {
    const { payoutId, request } = await held(3n);
    await setFaults(t.mesh, [{ kind: FaultKind.LATENCY, latencyMs: 1500, count: 1, clientReferencePrefix: payoutId }]);
    const answer = proxy().submitPayout(request);
    await forwarding(payoutId);
    await t.paydb.query("UPDATE payouts SET state = 'PAID', rail_reference = 'rr-earlier' WHERE payout_id = $1", [payoutId]);
    const res = await answer;
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(res.payoutClosed).toBe(false);
    expect(await payout(payoutId)).toMatchObject({ state: "PAID", rail_reference: "rr-earlier" });
  });

  it("REJECTED leaves the payout to its holder (payout_closed false, still PROCESSING)", async () => {
    const { payoutId, request } = await held(3n);
    await setFaults(t.mesh, [{ kind: FaultKind.REJECT, latencyMs: 0, count: 1, clientReferencePrefix: payoutId }]);
    const res = await proxy().submitPayout(request);
    expect(res.submission?.state).toBe(SubmissionState.REJECTED);
    expect(res.payoutClosed).toBe(false);
    expect(await payout(payoutId)).toMatchObject({ state: "PROCESSING", fence: "3" });
  });

  it("answers recorded together (one outcome statement for a group) close each its own payout", async () => {
    const payouts = await Promise.all(Array.from({ length: 12 }, () => held(3n)));
    const answers = await Promise.all(payouts.map((p) => proxy().submitPayout(p.request)));
    expect(answers.map((a) => a.payoutClosed)).toEqual(payouts.map(() => true));
    for (const [i, p] of payouts.entries()) {
      expect(await payout(p.payoutId)).toMatchObject({ state: "PAID", rail_reference: answers[i]!.submission!.railReference, submission_ref: p.payoutId });
    }
  });
});
