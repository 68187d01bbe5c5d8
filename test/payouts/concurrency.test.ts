/**
 * 100 concurrent CreatePayout calls over 10 keys: exactly 10 payouts exist afterwards, and
 * every answer is either the key's stored answer or IDEMPOTENCY_CONFLICT.
 */
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { usePayoutsService, countPayouts, create, newKey, sql, validRequest, type CallResult } from "./support.js";

const t = usePayoutsService();

describe("concurrent requests with the same keys", () => {
  it("100 concurrent calls over 10 keys create exactly 10 payouts; every answer is the stored one or a conflict", async () => {
    const intents = Array.from({ length: 10 }, (_, i) => ({ key: newKey(), req: validRequest({ accountId: `acct-conc-${i % 3}` }) }));
    const calls = Array.from({ length: 100 }, (_, i) => intents[i % 10]!);
    // Half over gRPC binary, half over Connect JSON: two HTTP/2 connections, many streams each.
    const results: CallResult[] = await Promise.all(calls.map(({ key, req }, i) => create(i % 2 ? t.c.json : t.c.grpc, req, key)));

    expect(await countPayouts(t.paydb)).toBe(10);
    const stored = await sql<{ idempotency_key: string; payout_id: string; state: string }>(
      t.paydb,
      "SELECT idempotency_key, payout_id, state FROM idempotency_keys",
    );
    expect(stored).toHaveLength(10);
    const storedByKey = new Map(stored.map((r) => [r.idempotency_key, r]));

    let successes = 0;
    let conflicts = 0;
    results.forEach((r, i) => {
      const { key } = calls[i]!;
      if (r.error) {
        expect(r.error.code).toBe(Code.Aborted);
        expect(r.reason).toBe("IDEMPOTENCY_CONFLICT");
        conflicts++;
      } else {
        expect(storedByKey.get(key)?.state).toBe("DONE");
        expect(r.response!.payout!.payoutId).toBe(storedByKey.get(key)!.payout_id);
        successes++;
      }
    });
    expect(successes + conflicts).toBe(100);
    expect(successes).toBeGreaterThanOrEqual(10); // each key's first request succeeded

    // After the burst every key answers with its stored result.
    for (const { key, req } of intents) {
      const r = await create(t.c.grpc, req, key);
      expect(r.replayed).toBe(true);
      expect(r.response!.payout!.payoutId).toBe(storedByKey.get(key)!.payout_id);
    }
    expect(await countPayouts(t.paydb)).toBe(10);
  });
});
