/**
 * Refusals that no retry can cure end somewhere a human sees, never in an endless defer loop:
 * the payout becomes NEEDS_ATTENTION with the reason, the executor counts it, and it stops
 * attempting. Cases, against real processes:
 * - the proxy does not accept the lock's token signatures (a key mismatch during rotation):
 *   permission_denied TOKEN_SIGNATURE_INVALID;
 * - the account's mark is above anything the lock can issue (forged, or a backend switch
 *   without a token floor): FENCED_OUT while the executor still holds the lease;
 * - the payout row changed under the executor (its amount no longer matches what it submits):
 *   the proxy's binding refuses with PAYOUT_MISMATCH.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { eventually, metricValue } from "../support/clients.js";
import { insertPayouts, logEvents, waitForLog } from "../executor/support.js";
import { quietFor } from "../support/time.js";

const executors: ServiceProcess[] = [];

const t = useMesh({ proxies: 2, signTokens: true });

beforeAll(async () => {
  await t.mesh.startLock();
  // Replica 1 verifies signatures with a key the lock service does not sign with.
  const otherKey = join(t.mesh.stateDir, "secrets", "other-token-key");
  writeFileSync(otherKey, `${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
  await t.mesh.proxies[0]!.restart({ RAIL_PROXY_TOKEN_KEY_FILE: otherKey });
});

afterEach(async () => {
  await Promise.all(executors.splice(0).map((e) => e.stop(10_000)));
});

async function executor(id: string, proxy: number, env: Record<string, string> = {}): Promise<ServiceProcess> {
  const e = await t.mesh.addExecutor({
    EXECUTOR_ID: id,
    RAIL_PROXY_URLS: t.mesh.proxies[proxy]!.url,
    POLL_INTERVAL_MS: "50",
    LEASE_TTL_MS: "2000",
    CALL_TIMEOUT_MS: "2000",
    ...env,
  });
  executors.push(e);
  return e;
}

async function payout(payoutId: string) {
  const { rows } = await t.paydb.query<{ state: string; attention_reason?: string | null; attention_detail?: string | null }>(
    "SELECT * FROM payouts WHERE payout_id = $1",
    [payoutId],
  );
  return rows[0]!;
}

const attemptsOf = (e: ServiceProcess, payoutId: string) => logEvents(e).filter((l) => l.event === "payout_attempt" && l.payout_id === payoutId);

/** Waits for NEEDS_ATTENTION, then checks the executor stopped trying and counted it. */
async function expectNeedsAttention(e: ServiceProcess, payoutId: string, reason: string): Promise<void> {
  await eventually(
    async () => (await payout(payoutId)).state === "NEEDS_ATTENTION",
    `${payoutId} to need attention (attempts so far: ${attemptsOf(e, payoutId).length})`,
    20_000,
  ).catch((err: Error) => {
    throw new Error(
      `${err.message}; attempts logged: ${attemptsOf(e, payoutId).length}, outcomes: ${[...new Set(attemptsOf(e, payoutId).map((a) => `${a.outcome}/${a.why ?? a.where ?? ""}`))].join(", ")}`,
    );
  });
  expect((await payout(payoutId)).attention_reason).toBe(reason);
  // The attempt is logged after its row: wait for its line, then give more attempts every chance.
  await waitForLog(e, (l) => l.event === "payout_attempt" && l.payout_id === payoutId && l.outcome === "NEEDS_ATTENTION", "the NEEDS_ATTENTION attempt");
  await quietFor(1500, "more attempts at a payout no retry can pay");
  const attempts = attemptsOf(e, payoutId);
  expect(attempts.length, "the executor keeps attempting a payout no retry can pay").toBeLessThanOrEqual(2);
  expect(attempts.at(-1)?.outcome).toBe("NEEDS_ATTENTION");
  expect(await metricValue(e.ready!.metricsPort, "railfence_executor_needs_attention_total", `reason="${reason.toLowerCase()}"`)).toBeGreaterThanOrEqual(1);
}

describe("non-transient refusals put the payout in NEEDS_ATTENTION", () => {
  it("a token-signature key mismatch (permission_denied) is not retried for ever", async () => {
    await insertPayouts(t.paydb, [{ payoutId: "po-attn-sig", accountId: "acc-attn-sig" }]);
    const e = await executor("executor-attn-sig", 0);
    await expectNeedsAttention(e, "po-attn-sig", "TOKEN_SIGNATURE_INVALID");
  });

  it("an account whose mark is above anything the lock can issue is flagged, not fenced out for ever", async () => {
    await insertPayouts(t.paydb, [{ payoutId: "po-attn-mark", accountId: "acc-attn-mark" }]);
    await t.paydb.query("INSERT INTO rail_high_water (account_id, mark) VALUES ('acc-attn-mark', 9223372036854775807)");
    const e = await executor("executor-attn-mark", 1);
    await expectNeedsAttention(e, "po-attn-mark", "MARK_AHEAD_OF_LOCK");
  });

  it("a binding refusal (the payout changed under the executor) is flagged with the proxy's reason", async () => {
    await insertPayouts(t.paydb, [{ payoutId: "po-attn-bind", accountId: "acc-attn-bind", amountMinor: 1000n }]);
    const e = await executor("executor-attn-bind", 1, { EXECUTOR_PAUSE_AFTER_FENCE_MS: "1500" });
    await eventually(async () => logEvents(e).some((l) => l.event === "fenced" && l.payout_id === "po-attn-bind"), "the payout to be fenced");
    await t.paydb.query("UPDATE payouts SET amount_minor = 999999 WHERE payout_id = 'po-attn-bind'");
    await expectNeedsAttention(e, "po-attn-bind", "PAYOUT_MISMATCH");
  });
});
