/**
 * Signed fencing tokens: with a key shared by the lock service and rail-proxy, only tokens the
 * lock service issued can move a mark. A compromised executor's forged token (say 2^63-1, which
 * would fence its account out for ever) is refused in step 0 and changes nothing. The negative
 * control shows the same forged token getting through a proxy that does not verify.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { signToken } from "../../services/shared/process/token-signature.js";
import { MAX_TOKEN } from "../../services/shared/domain/validation.js";
import { connectClient, db, eventually, expectRejected, proxyClient, railBookings } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";

let mesh: Mesh;
let paydb: pg.Client;
let raildb: pg.Client;
let key: Buffer;
const request = (accountId: string, payoutId: string, fencingToken: bigint, fencingTokenSignature = new Uint8Array(0)) => ({
  accountId,
  payoutId,
  fencingToken,
  fencingTokenSignature,
  amount: { amountMinor: 500n, currency: "EUR" },
  beneficiary: "ben-sig",
});
const markOf = async (acc: string) => (await paydb.query("SELECT mark FROM rail_high_water WHERE account_id = $1", [acc])).rows[0]?.mark as string | undefined;

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, signTokens: true });
  await mesh.start();
  await mesh.startLock();
  await mesh.startPayouts();
  await mesh.addExecutor();
  key = Buffer.from(readFileSync(mesh.tokenKeyFile!, "utf8").trim(), "utf8");
  paydb = await db(mesh.dbUrl("paydb"));
  raildb = await db(mesh.dbUrl("raildb"));
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

describe("signed fencing tokens", () => {
  it("a payout is paid end to end: the executor passes the lock's signature through", async () => {
    const payouts = connectClient(PayoutService, mesh.payouts!.url);
    const { payout } = await payouts.createPayout(
      { accountId: "acc-signed", amount: { amountMinor: 700n, currency: "EUR" }, beneficiary: "ben-1" },
      { headers: { "idempotency-key": randomUUID() } },
    );
    await eventually(async () => (await payouts.getPayout({ payoutId: payout!.payoutId })).payout?.state === 3, "payout PAID");
    expect(await railBookings(raildb, payout!.payoutId)).toBe(1);
  });

  it("a forged token without a valid signature is refused in step 0 and changes nothing", async () => {
    const proxy = proxyClient(mesh.proxies[0]!.url);
    const acc = `acc-forged-${Date.now()}`;
    const p = `p-forged-${Date.now()}`;
    // The payout is fenced for the genuine token, so the binding would pass token 7: what
    // refuses the forgeries below is the signature check alone.
    const genuine = await fencedFor(paydb, request(acc, p, 7n, signToken(key, `account:${acc}`, 7n)));
    await expectRejected(proxy.submitPayout(request(acc, p, MAX_TOKEN)), Code.PermissionDenied, "TOKEN_SIGNATURE_INVALID");
    await expectRejected(proxy.submitPayout(request(acc, p, MAX_TOKEN, new Uint8Array(32))), Code.PermissionDenied, "TOKEN_SIGNATURE_INVALID");
    // A real signature, but for another account's lock key.
    await expectRejected(proxy.submitPayout(request(acc, p, 7n, signToken(key, "account:someone-else", 7n))), Code.PermissionDenied, "TOKEN_SIGNATURE_INVALID");
    expect(await markOf(acc)).toBeUndefined();
    expect(await railBookings(raildb, p)).toBe(0);
    // The genuine article is admitted.
    const res = await proxy.submitPayout(genuine);
    expect(res.submission?.railReference).toMatch(/^rr_/);
    expect(await markOf(acc)).toBe("7");
  });

  it("negative control: a proxy that does not verify lets the forged token fence the account out", async () => {
    const env = mesh.proxyEnv(9);
    delete env.RAIL_PROXY_TOKEN_KEY_FILE;
    const unverified = new ServiceProcess({ service: "rail-proxy", name: "rail-proxy-unverified", env });
    await unverified.start();
    try {
      const acc = `acc-lockout-${Date.now()}`;
      // The forged token on the payout, planted as paydb's owner: paydb's own signature check
      // (migration 014) is another guard, left out so that this control removes the proxy's alone.
      const forged = request(acc, `p-lockout-${Date.now()}`, MAX_TOKEN);
      await paydb.query(
        `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence, claimed_by, claimed_until)
         VALUES ($1, 'test-client', $2, $3, $4, $5, 'PROCESSING', $6, 'test', now() + interval '10 minutes')`,
        [forged.payoutId, acc, forged.amount.amountMinor.toString(), forged.amount.currency, forged.beneficiary, MAX_TOKEN.toString()],
      );
      await proxyClient(unverified.url).submitPayout(forged);
      expect(await markOf(acc)).toBe(MAX_TOKEN.toString());
    } finally {
      await unverified.stop();
    }
  });
});
