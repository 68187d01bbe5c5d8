/**
 * Only a proven not-sent re-opens a payout (migration 011). A NOT_PAID resolution is a judgement
 * (the statement was silent, or an operator said so), and a judgement can be wrong: here the
 * rail DID book the first submission and its answer was lost. Under the old rule the resolution
 * ended the submission's "live" status, so a newer holder of the payout was admitted again and
 * the rail paid twice. paydb now keeps such a payout closed until an operator re-opens it
 * explicitly (reopen_payout: the owner only, with an actor and a reason, recorded).
 *
 * Negative control: the old one-live index, installed into this test's throwaway paydb, admits
 * the second submission and the rail books the payout twice.
 */
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { FaultKind } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { ResolutionOutcome, SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { expectRejected, proxyClient } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { PAYOUT_OF_REFERENCE, setFaults } from "../executor/support.js";

const TIMING = { RAIL_DEADLINE_MS: "500", AMBIGUITY_MARGIN_MS: "1000", ADMISSION_TIMEOUT_MS: "2000" };
const OLD_INDEX = `CREATE UNIQUE INDEX rail_submissions_one_live_per_payout ON rail_submissions (bound_payout_id)
  WHERE state NOT IN ('REJECTED', 'RESOLVED_NOT_PAID', 'NOT_FORWARDED')`;
const NEW_INDEX = `CREATE UNIQUE INDEX rail_submissions_one_live_per_payout ON rail_submissions (bound_payout_id)
  WHERE state NOT IN ('REJECTED', 'NOT_FORWARDED') AND reopened_at IS NULL`;

const t = useMesh({ proxies: 1, proxyEnv: TIMING });

const request = (payoutId: string, token: bigint) => ({
  accountId: `acc-${payoutId.replace(/:t\d+$/, "")}`,
  payoutId,
  fencingToken: token,
  amount: { amountMinor: 2700n, currency: "EUR" },
  beneficiary: "ben-reopen",
});

async function bookings(payoutId: string): Promise<number> {
  const { rows } = await t.raildb.query<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE ${PAYOUT_OF_REFERENCE} = $1 AND status = 'ACCEPTED'`, [
    payoutId,
  ]);
  return rows[0]!.n;
}

/**
 * A first submission that leaves the proxy TIMEOUT; a newer holder re-fences the payout (token 6)
 * before an operator's NOT_PAID verdict on the first. The verdict therefore leaves the payout as it
 * is (PROCESSING under the newer fence: the fence rule of decision 066), and the one-live index is
 * the only thing between the newer holder's submission and the rail. Returns that submission.
 */
async function judgedNotPaidAfterRefence(payoutId: string, fault: FaultKind) {
  await setFaults(t.mesh, [{ kind: fault, count: 1, clientReferencePrefix: payoutId }]);
  const first = `${payoutId}:t5`;
  await proxyClient(t.mesh.proxies[0]!.url)
    .submitPayout(await fencedFor(t.paydb, request(first, 5n)))
    .catch(() => undefined);
  const newer = await fencedFor(t.paydb, request(`${payoutId}:t6`, 6n));
  const resolved = await proxyClient(t.mesh.proxies[0]!.url).resolveSubmission({
    payoutId: first,
    outcome: ResolutionOutcome.NOT_PAID,
    actor: "operator:bob",
    note: "not on the statement (test: forced before the floor)",
    force: true,
  });
  expect(resolved.submission?.state).toBe(SubmissionState.RESOLVED_NOT_PAID);
  expect(resolved.payoutState, "a newer holder fenced the payout: the verdict leaves it open").toBe("");
  return newer;
}

const submit = async (request: Awaited<ReturnType<typeof judgedNotPaidAfterRefence>>) => proxyClient(t.mesh.proxies[0]!.url).submitPayout(request);

/** A later holder re-fences the payout and submits. */
async function submitAgain(payoutId: string, token: bigint) {
  return submit(await fencedFor(t.paydb, request(`${payoutId}:t${token}`, token)));
}

describe("a NOT_PAID verdict keeps the payout closed", () => {
  it("a payout judged NOT_PAID (wrongly: the rail had booked it) is not admitted again: PAYOUT_ALREADY_SUBMITTED, paid once", async () => {
    const payoutId = "po-reopen-wrong";
    const newer = await judgedNotPaidAfterRefence(payoutId, FaultKind.LAND_THEN_LOSE_ANSWER);
    expect(await bookings(payoutId)).toBe(1);
    await expectRejected(submit(newer), Code.AlreadyExists, "PAYOUT_ALREADY_SUBMITTED");
    expect(await bookings(payoutId)).toBe(1);
  });

  it("an operator re-opens a payout closed NOT_PAID explicitly (owner, actor, reason): then it is paid, once", async () => {
    const payoutId = "po-reopen-ok";
    const newer = await judgedNotPaidAfterRefence(payoutId, FaultKind.NEVER_LAND_HANG);
    await expectRejected(submit(newer), Code.AlreadyExists, "PAYOUT_ALREADY_SUBMITTED");
    // The newer holder leaves the payout UNKNOWN on that refusal and rail-proxy's sweeper closes it
    // FAILED from the verdict (decision 066); written directly here, the sweep has its own test.
    await t.paydb.query("UPDATE payouts SET state = 'FAILED', failure_reason = 'RESOLVED_NOT_PAID' WHERE payout_id = $1", [payoutId]);
    const { rows } = await t.paydb.query("SELECT * FROM reopen_payout($1, $2, $3)", [payoutId, "operator:alice", "statement and bank checked: never paid"]);
    expect(rows).toEqual([{ reopened_submissions: 1 }]);
    const { rows: ledger } = await t.paydb.query("SELECT reopen_actor, reopen_reason FROM rail_submissions WHERE bound_payout_id = $1", [payoutId]);
    expect(ledger).toEqual([{ reopen_actor: "operator:alice", reopen_reason: "statement and bank checked: never paid" }]);
    const { rows: payout } = await t.paydb.query("SELECT state FROM payouts WHERE payout_id = $1", [payoutId]);
    expect(payout[0].state).toBe("PENDING");
    const paid = await submitAgain(payoutId, 7n);
    expect(paid.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(await bookings(payoutId)).toBe(1);
  });

  it("a re-opening is refused, changing nothing, without a reason, for a payout with a live or refused-only submission, and to a service role", async () => {
    const payoutId = "po-reopen-refused";
    await judgedNotPaidAfterRefence(payoutId, FaultKind.NEVER_LAND_HANG);
    await t.paydb.query("UPDATE payouts SET state = 'FAILED' WHERE payout_id = $1", [payoutId]);
    const snapshot = async () => ({
      payout: (await t.paydb.query("SELECT state, fence FROM payouts WHERE payout_id = $1", [payoutId])).rows,
      ledger: (await t.paydb.query("SELECT payout_id, state, reopened_at FROM rail_submissions WHERE bound_payout_id = $1", [payoutId])).rows,
    });
    const before = await snapshot();
    const sqlstate = (p: Promise<unknown>) =>
      p.then(
        () => "ok",
        (e: { code?: string }) => e.code,
      );
    expect(await sqlstate(t.paydb.query("SELECT * FROM reopen_payout($1, $2, $3)", [payoutId, "operator:alice", "short"]))).toBe("22023");
    expect(await sqlstate(t.paydb.query("SELECT * FROM reopen_payout($1, $2, $3)", [payoutId, " ", "a reason long enough"]))).toBe("22023");
    expect(await sqlstate(t.roleDb("paydb", "executor").query("SELECT * FROM reopen_payout($1, $2, $3)", [payoutId, "executor", "a reason long enough"]))).toBe(
      "42501",
    );
    // The executor's role cannot write the re-opening columns either (no grant).
    expect(await sqlstate(t.roleDb("paydb", "executor").query("UPDATE rail_submissions SET reopened_at = now() WHERE bound_payout_id = $1", [payoutId]))).toBe(
      "42501",
    );
    expect(await snapshot()).toEqual(before);

    // A payout whose only submission the rail refused is final: a new payout, not a re-opening.
    const refusedId = "po-reopen-rejected";
    await setFaults(t.mesh, [{ kind: FaultKind.REJECT, count: 1, clientReferencePrefix: refusedId }]);
    await proxyClient(t.mesh.proxies[0]!.url).submitPayout(await fencedFor(t.paydb, request(`${refusedId}:t5`, 5n)));
    await t.paydb.query("UPDATE payouts SET state = 'FAILED' WHERE payout_id = $1", [refusedId]);
    expect(await sqlstate(t.paydb.query("SELECT * FROM reopen_payout($1, $2, $3)", [refusedId, "operator:alice", "a reason long enough"]))).toBe("55000");
    // A payout with a live submission is not re-opened.
    const liveId = "po-reopen-live";
    await setFaults(t.mesh, [{ kind: FaultKind.NEVER_LAND_HANG, count: 1, clientReferencePrefix: liveId }]);
    await proxyClient(t.mesh.proxies[0]!.url)
      .submitPayout(await fencedFor(t.paydb, request(`${liveId}:t5`, 5n)))
      .catch(() => undefined);
    await t.paydb.query("UPDATE payouts SET state = 'FAILED' WHERE payout_id = $1", [liveId]);
    expect(await sqlstate(t.paydb.query("SELECT * FROM reopen_payout($1, $2, $3)", [liveId, "operator:alice", "a reason long enough"]))).toBe("55000");
  });

  it("negative control: with the old index (NOT_PAID ends a submission's live status) the same wrong verdict is paid twice", async () => {
    const payoutId = "po-reopen-control";
    await t.paydb.query(`DROP INDEX rail_submissions_one_live_per_payout; ${OLD_INDEX}`);
    try {
      const newer = await judgedNotPaidAfterRefence(payoutId, FaultKind.LAND_THEN_LOSE_ANSWER);
      const again = await submit(newer);
      expect(again.submission?.state).toBe(SubmissionState.ACCEPTED);
      expect(await bookings(payoutId), "the payout paid twice").toBe(2);
    } finally {
      // Two live submissions of one payout now exist under the new rule: this payout's ledger is
      // the control's evidence, so the index is rebuilt excluding it.
      await t.paydb.query(
        `DROP INDEX rail_submissions_one_live_per_payout; ${NEW_INDEX.replace("reopened_at IS NULL", "reopened_at IS NULL AND bound_payout_id <> 'po-reopen-control'")}`,
      );
    }
  });
});
