/**
 * paydb accepts a payout fence only with a token the lock service signed (migration 014; issue:
 * "the executor's role can park any payout for ever"). Before it, the executor's role could raise
 * a fence to 9223372036854775807: honest executors are then fenced out of that payout for ever
 * (the FENCE_AHEAD_OF_LOCK check flags it, but the payout still needs a human).
 *
 * A mesh with signed tokens (the harness installs the lock's key into paydb, as `migrate paydb`
 * does with TOKEN_SIGNING_KEY_FILE), logged in as the real executor role:
 * - an honest executor pays through the check (its fence carries the lock's signature);
 * - a fence with no signature, another token's, another account's, or one made with another key
 *   is refused (SQLSTATE 42501) and changes nothing;
 * - negative control: the check removed alone (its trigger disabled, as the owner), the forged
 *   fence lands, and the next executor's FENCE_AHEAD_OF_LOCK check is what catches it.
 */
import { randomBytes } from "node:crypto";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { accountLockKey, signingKeyFromFile, signToken } from "../../services/shared/process/token-signature.js";
import { insertPayouts, waitForLog } from "../executor/support.js";

const MAX_TOKEN = 9223372036854775807n;
let key: Buffer;
const executors: ServiceProcess[] = [];

const t = useMesh({ proxies: 1, signTokens: true });

beforeAll(async () => {
  await t.mesh.startLock();
  key = signingKeyFromFile(t.mesh.tokenKeyFile, "token-signing key")!;
});

afterEach(async () => {
  await Promise.all(executors.splice(0).map((e) => e.stop(10_000)));
});

const sqlstate = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: { code?: string }) => e.code ?? "error",
  );

async function executor(id: string): Promise<ServiceProcess> {
  const e = await t.mesh.addExecutor({ EXECUTOR_ID: id, POLL_INTERVAL_MS: "50", LOG_LEVEL: "info" });
  executors.push(e);
  return e;
}

async function payoutRow(payoutId: string) {
  const { rows } = await t.paydb.query<{ fence: string; state: string; attention_reason: string | null }>(
    "SELECT fence::text, state, attention_reason FROM payouts WHERE payout_id = $1",
    [payoutId],
  );
  return rows[0]!;
}

/** The executor role's fence write, with the signature it presents. */
const fenceAs = (payoutId: string, fence: bigint, signature: Buffer | null) =>
  t
    .roleDb("paydb", "executor")
    .query("UPDATE payouts SET fence = $2, fence_signature = $3, updated_at = now() WHERE payout_id = $1", [payoutId, fence.toString(), signature]);

describe("paydb verifies every payout fence against the lock's signature", () => {
  it("an honest executor pays through the check: its fence carries the lock's signature", async () => {
    await insertPayouts(t.paydb, [{ payoutId: "po-sig-honest", accountId: "acc-sig-honest" }]);
    const e = await executor("exec-sig-honest");
    const attempt = await waitForLog(e, (l) => l.event === "payout_attempt" && l.payout_id === "po-sig-honest", "the attempt");
    expect(attempt).toMatchObject({ outcome: "PAID" });
    expect((await payoutRow("po-sig-honest")).state).toBe("PAID");
  });

  it.each([
    ["no signature", (_acc: string, _t: bigint) => null],
    ["the signature of another token", (acc: string, _t: bigint) => Buffer.from(signToken(key, accountLockKey(acc), 5n))],
    ["the signature of another account", (_acc: string, t: bigint) => Buffer.from(signToken(key, accountLockKey("acc-other"), t))],
    ["a signature made with another key", (acc: string, t: bigint) => Buffer.from(signToken(randomBytes(32), accountLockKey(acc), t))],
  ])("a forged fence with %s is refused (42501) and changes nothing", async (_what, sign) => {
    const payoutId = `po-sig-forged-${randomBytes(3).toString("hex")}`;
    const accountId = `acc-${payoutId}`;
    await insertPayouts(t.paydb, [{ payoutId, accountId }]);
    expect(await sqlstate(fenceAs(payoutId, MAX_TOKEN, sign(accountId, MAX_TOKEN)))).toBe("42501");
    expect(await payoutRow(payoutId)).toMatchObject({ fence: "0", state: "PENDING" });
  });

  it("a token the lock signed for the account is accepted from the same role (the check is the signature, not the role)", async () => {
    await insertPayouts(t.paydb, [{ payoutId: "po-sig-valid", accountId: "acc-sig-valid" }]);
    expect(await sqlstate(fenceAs("po-sig-valid", 42n, Buffer.from(signToken(key, accountLockKey("acc-sig-valid"), 42n))))).toBe("ok");
    expect((await payoutRow("po-sig-valid")).fence).toBe("42");
  });

  it("negative control: with the check removed alone the forged fence lands, and the next executor flags it FENCE_AHEAD_OF_LOCK", async () => {
    await insertPayouts(t.paydb, [{ payoutId: "po-sig-nocheck", accountId: "acc-sig-nocheck" }]);
    await t.paydb.query("ALTER TABLE payouts DISABLE TRIGGER payouts_fence_signed");
    try {
      expect(await sqlstate(fenceAs("po-sig-nocheck", MAX_TOKEN, null))).toBe("ok");
    } finally {
      await t.paydb.query("ALTER TABLE payouts ENABLE TRIGGER payouts_fence_signed");
    }
    expect((await payoutRow("po-sig-nocheck")).fence).toBe(MAX_TOKEN.toString());
    const e = await executor("exec-sig-nocheck");
    const attempt = await waitForLog(e, (l) => l.event === "payout_attempt" && l.payout_id === "po-sig-nocheck", "the attempt");
    expect(attempt).toMatchObject({ outcome: "NEEDS_ATTENTION", why: "FENCE_AHEAD_OF_LOCK" });
    expect(await payoutRow("po-sig-nocheck")).toMatchObject({ state: "NEEDS_ATTENTION", attention_reason: "FENCE_AHEAD_OF_LOCK" });
  });
});
