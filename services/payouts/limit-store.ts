/**
 * The shared store of money-limit usage: the only layer that knows `payout_limit_usage` and its
 * functions (migrations/paydb/010_payout_limits.sql). One round trip per consumption; the pool
 * is its own, with short timeouts, so a slow or unreachable store fails fast (fail closed)
 * instead of holding a payout request.
 */
import type { Pool } from "../shared/db/pg.js";
import type { Consumption, LimitDecision } from "./limits.js";
import { int8 } from "../shared/domain/int8.js";

export interface ConsumeParams {
  clientId: string;
  rateLimit: number;
  rateWindowMs: number;
  accountId: string;
  currency: string;
  amountMinor: bigint;
  /** null = off */
  amountLimit: bigint | null;
}

interface ConsumeRow {
  outcome: "OK" | "CLIENT_RATE" | "ACCOUNT_DAILY_AMOUNT";
  used: string | null;
  limit_value: string | null;
  resets_at: Date | null;
  rate_window: Date | null;
  day_window: Date | null;
}

export function createLimitStore(pool: Pool) {
  return {
    async consume(p: ConsumeParams): Promise<LimitDecision> {
      // Named: prepared once per connection (every CreatePayout runs it).
      const { rows } = await pool.query<ConsumeRow>({
        name: "payouts_limits_consume",
        text: "SELECT * FROM consume_payout_limits($1, $2, $3, $4, $5, $6, $7)",
        values: [
          p.clientId,
          p.rateLimit,
          p.rateWindowMs,
          p.accountId,
          p.currency,
          p.amountMinor.toString(),
          p.amountLimit === null ? null : p.amountLimit.toString(),
        ],
      });
      const r = rows[0]!;
      if (r.outcome === "OK") return { kind: "ok", consumption: { rateWindow: r.rate_window, dayWindow: r.day_window } };
      return { kind: "exceeded", limit: r.outcome, used: int8(r.used ?? "0"), limitValue: int8(r.limit_value ?? "0"), resetsAt: r.resets_at! };
    },

    /** Gives back a consumption whose payout provably was not created. */
    async refund(p: { clientId: string; accountId: string; currency: string; amountMinor: bigint }, c: Consumption): Promise<void> {
      await pool.query("SELECT refund_payout_limits($1, $2, $3, $4, $5, $6)", [
        p.clientId,
        c.rateWindow,
        p.accountId,
        p.currency,
        p.amountMinor.toString(),
        c.dayWindow,
      ]);
    },

    /**
     * Start-up check: a primary with the limit migrations (table and both functions, as this
     * service calls them). paydb's own check covers the default store; LIMITS_DB_URL may name another.
     */
    async checkReady(): Promise<void> {
      let ok: boolean;
      try {
        const { rows } = await pool.query<{ ok: boolean }>(
          `SELECT to_regclass('payout_limit_usage') IS NOT NULL
              AND to_regprocedure('consume_payout_limits(text, bigint, bigint, text, text, bigint, numeric)') IS NOT NULL
              AND to_regprocedure('refund_payout_limits(text, timestamptz, text, text, bigint, timestamptz)') IS NOT NULL AS ok`,
        );
        ok = rows[0]?.ok === true;
      } catch (err) {
        throw new Error(`the money-limit store cannot be used: ${(err as Error).message}`);
      }
      if (!ok) throw new Error("the money-limit store (LIMITS_DB_URL) is not migrated (run: node dist/services/migrate/main.js paydb against it)");
    },

    /** Deletes usage of windows that ended more than two days ago (in batches). */
    async purgeExpired(batch: number): Promise<number> {
      const res = await pool.query(
        `DELETE FROM payout_limit_usage WHERE ctid IN (
           SELECT ctid FROM payout_limit_usage WHERE window_start < now() - interval '2 days' LIMIT $1)`,
        [batch],
      );
      return res.rowCount ?? 0;
    },
  };
}

export type LimitStore = ReturnType<typeof createLimitStore>;
