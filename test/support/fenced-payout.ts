/**
 * The payout an honest executor holds when it calls SubmitPayout. rail-proxy admits a submission
 * only for a payout in paydb with the same account, amount, currency and beneficiary, in state
 * PROCESSING and fenced by the very token presented (SPEC C3 §3.9). Tests that submit to the
 * proxy directly play that executor: `proxy.submitPayout(await fencedFor(paydb, request))`.
 *
 * It does what the payouts API and an executor would have done, nothing more: create the payout
 * if it does not exist yet, then fence it with the executor's own fencing statement (`fence <
 * token` only, and only while it is PENDING or PROCESSING). It never rewrites what an existing payout pays
 * and never lowers a fence, so a stale or mismatching request stays stale or mismatching.
 */
import type pg from "pg";
import { createPayoutStore } from "../../services/executor/payout-store.js";
import { payoutIdOf } from "../../services/shared/domain/submission-ref.js";

/** The SubmitPayout fields the binding compares (a request literal fits as is). */
export interface SubmitFields {
  accountId: string;
  payoutId: string;
  fencingToken: bigint;
  /** The lock's signature of the token, when the mesh signs tokens: paydb checks it on the fence (migration 014). */
  fencingTokenSignature?: Uint8Array;
  amount?: { amountMinor?: bigint; currency?: string };
  beneficiary: string;
}

type Queryable = pg.ClientBase | pg.Pool;

// Claimed by the test for ten minutes, as a holder claims what it works on: a mesh's executors
// leave it alone (the token is the test's own, not one the lock issued; an executor would flag
// a fence above every token the lock issued as FENCE_AHEAD_OF_LOCK).
const CLAIM_MS = 10 * 60_000;

// What the payouts API inserts for a client (nothing when the payout exists: never rewritten).
const CREATE = `
  INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state)
  VALUES ($1, 'test-client', $2, $3, $4, $5, 'PENDING')
  ON CONFLICT (payout_id) DO NOTHING`;

/**
 * Fences an existing payout for `token` with the executor's own statement (`fence` in
 * services/executor/payout-store.ts: PENDING or PROCESSING, fence below the token, PROCESSING
 * after), so a test's holder is exactly what an executor's fencing write makes. Resolves false when
 * that statement fences nothing (a newer token holds the payout, or it is no longer payable).
 */
export async function fenceAsExecutor(
  paydb: Queryable,
  payoutId: string,
  token: bigint,
  executorId = "test",
  signature: Uint8Array = new Uint8Array(),
): Promise<boolean> {
  const store = createPayoutStore(paydb as pg.Pool);
  return (await store.fence(payoutId, token, signature, executorId, CLAIM_MS)) !== undefined;
}

/** fenceAsExecutor, for a test whose arrangement needs it to succeed: throws when it fences nothing. */
export async function fencedByExecutor(paydb: Queryable, payoutId: string, token: bigint, executorId = "test"): Promise<void> {
  if (!(await fenceAsExecutor(paydb, payoutId, token, executorId))) {
    throw new Error(`payout ${payoutId} cannot be fenced with token ${token}: a newer token holds it, or it is not payable`);
  }
}

/** Runs `work` in one transaction: on a pool, on a client of its own; on a client, on it. */
async function inOneTransaction(paydb: Queryable, work: (tx: pg.ClientBase) => Promise<void>): Promise<void> {
  const pooled = "totalCount" in paydb;
  const tx = pooled ? await (paydb as pg.Pool).connect() : (paydb as pg.ClientBase);
  try {
    await tx.query("BEGIN");
    await work(tx);
    await tx.query("COMMIT");
  } catch (e) {
    await tx.query("ROLLBACK").catch(() => undefined);
    throw e;
  } finally {
    if (pooled) (tx as pg.PoolClient).release();
  }
}

/**
 * Creates and fences the payout `request` pays (the payout id of its reference). Resolves true
 * when the payout now matches the request and is PROCESSING under its token, i.e. the proxy's
 * binding will admit it; false when an existing payout differs or a newer token holds it.
 */
export async function fencePayout(paydb: Queryable, request: SubmitFields): Promise<boolean> {
  const { amountMinor, currency } = request.amount ?? {};
  if (amountMinor === undefined || currency === undefined) throw new Error("fencePayout: the request has no amount");
  const payoutId = payoutIdOf(request.payoutId);
  const token = request.fencingToken.toString();
  // Created and fenced in one transaction: a mesh's executors are woken by the insert (decision
  // 069) and would otherwise claim the PENDING payout before the test fences it, then flag the
  // test's fence FENCE_AHEAD_OF_LOCK. Committed, the payout is already the test's.
  await inOneTransaction(paydb, async (tx) => {
    await tx.query(CREATE, [payoutId, request.accountId, amountMinor.toString(), currency, request.beneficiary]);
    await fenceAsExecutor(tx, payoutId, request.fencingToken, "test", request.fencingTokenSignature);
  });
  const { rows } = await paydb.query<{ account_id: string; amount_minor: string; currency: string; beneficiary: string; state: string; fence: string }>(
    "SELECT account_id, amount_minor::text, currency, beneficiary, state, fence::text FROM payouts WHERE payout_id = $1",
    [payoutId],
  );
  const p = rows[0]!;
  return (
    p.account_id === request.accountId &&
    p.amount_minor === amountMinor.toString() &&
    p.currency === currency &&
    p.beneficiary === request.beneficiary &&
    p.state === "PROCESSING" &&
    p.fence === token
  );
}

/**
 * The request, once its payout is fenced for it: `proxy.submitPayout(await fencedFor(paydb, req))`
 * submits as the payout's holder. Throws when the payout cannot be fenced for it (the test's
 * arrangement is wrong, not the proxy).
 */
export async function fencedFor<R extends SubmitFields>(paydb: Queryable, request: R): Promise<R> {
  if (!(await fencePayout(paydb, request))) {
    throw new Error(
      `payout ${payoutIdOf(request.payoutId)} cannot be fenced for ${request.accountId} with token ${request.fencingToken}: it differs or a newer token holds it`,
    );
  }
  return request;
}
