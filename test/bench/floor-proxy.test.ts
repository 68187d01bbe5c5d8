/**
 * The bench's floor proxy (workload F) is a yardstick: it is only a floor of the design if it does
 * the design's work. Each submission admits through rail_admit (binding, strict mark, intent),
 * forwards once to the real rail stub and records the answer; a refused admission forwards
 * nothing. A floor that skipped a step would look cheaper than the protocol allows.
 */
import { Code } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { connectClient } from "../../tools/harness/clients.js";
import { RailProxyService, SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { testMesh } from "../support/test-mesh.js";
import { startFloorProxy, type FloorProxy } from "./floor-proxy.js";

let mesh: Mesh;
let paydb: pg.Pool;
let raildb: pg.Pool;
let floor: FloorProxy;

beforeAll(async () => {
  mesh = testMesh({ proxies: 0 });
  await mesh.start();
  paydb = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 2 });
  raildb = new pg.Pool({ connectionString: mesh.dbUrl("raildb"), max: 2 });
  floor = await startFloorProxy(mesh.dbUrl("paydb"), mesh.railStub.url, mesh.credential);
}, 120_000);

afterAll(async () => {
  await floor?.stop();
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

/** A payout as an executor leaves it: PROCESSING, fenced with `token`. */
async function fenced(payoutId: string, accountId: string, token: number): Promise<void> {
  await paydb.query(
    `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence, claimed_by, claimed_until)
     VALUES ($1, 'floor-test', $2, 1050, 'EUR', 'ben-1', 'PROCESSING', $3, 'floor-test', now() + interval '1 hour')`,
    [payoutId, accountId, token],
  );
}

const booked = async (payoutId: string) =>
  (await raildb.query<{ n: number }>("SELECT count(*)::int AS n FROM payments WHERE client_reference = $1", [payoutId])).rows[0]!.n;
const ledger = async (payoutId: string) =>
  (await paydb.query<{ state: string }>("SELECT state FROM rail_submissions WHERE payout_id = $1", [payoutId])).rows.map((r) => r.state);

describe("bench floor proxy", () => {
  const client = () => connectClient(RailProxyService, floor.url);
  const submit = (payoutId: string, accountId: string, token: bigint) =>
    client().submitPayout({ payoutId, accountId, fencingToken: token, amount: { amountMinor: 1050n, currency: "EUR" }, beneficiary: "ben-1" });

  it("admits, forwards once to the real rail and records the answer", async () => {
    await fenced("fl-1", "fl-acc", 5);
    const res = await submit("fl-1", "fl-acc", 5n);
    expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    expect(await booked("fl-1")).toBe(1);
    expect(await ledger("fl-1")).toEqual(["ACCEPTED"]);
  });

  it("a second submission of the payout is refused and forwards nothing", async () => {
    await fenced("fl-2", "fl-acc-2", 5);
    await submit("fl-2", "fl-acc-2", 5n);
    await expect(submit("fl-2", "fl-acc-2", 6n)).rejects.toThrow();
    expect(await booked("fl-2")).toBe(1);
  });

  it("a token at or below the account's mark is refused and forwards nothing", async () => {
    await fenced("fl-3", "fl-acc-3", 7);
    await submit("fl-3", "fl-acc-3", 7n);
    await fenced("fl-4", "fl-acc-3", 7);
    await expect(submit("fl-4", "fl-acc-3", 7n)).rejects.toMatchObject({ code: Code.Aborted, rawMessage: expect.stringMatching(/FENCED_OUT/) });
    expect(await booked("fl-4")).toBe(0);
    expect(await ledger("fl-4")).toEqual([]);
  });
});
