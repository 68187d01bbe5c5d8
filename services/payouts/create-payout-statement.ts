/**
 * paydb access for CreatePayout in one statement: the only layer that knows `create_payout()`
 * (migrations/paydb/022_create_payout_in_one_statement.sql). One round trip, one transaction,
 * one durable commit settles the key, consumes the limits, inserts the payout and pins its
 * answer — or writes nothing.
 */
import type { Pool } from "../shared/db/pg.js";
import { int8 } from "../shared/domain/int8.js";

export interface CreatePayoutStatementParams {
  clientId: string;
  key: string;
  fingerprint: Buffer;
  retentionMs: number;
  payoutId: string;
  accountId: string;
  amountMinor: bigint;
  currency: string;
  beneficiary: string;
  clientReference: string;
  traceparent: string | null;
  /** The binary answer without what paydb alone knows (the payout's timestamps). */
  responseHead: Uint8Array;
  /** 0 = off. */
  rateLimit: number;
  rateWindowMs: number;
  /** null = off. */
  amountLimit: bigint | null;
  limitsLockWaitMs: number;
}

/** What the statement did. Only "created" wrote anything. */
export type CreatePayoutStatementOutcome =
  | { kind: "created"; response: Buffer; expiresAt: Date; takeover: boolean; limitsMs: number }
  | { kind: "replay"; response: Buffer; expiresAt: Date }
  | { kind: "reused"; expiresAt: Date }
  | { kind: "conflict"; retryAfterMs: number }
  | { kind: "exceeded"; limit: "CLIENT_RATE" | "ACCOUNT_DAILY_AMOUNT"; used: bigint; limitValue: bigint; resetsAt: Date; limitsMs: number };

interface StatementRow {
  outcome: "CREATED" | "REPLAY" | "REUSED" | "CONFLICT";
  response: Buffer | null;
  expires_at: Date | null;
  retry_after_ms: number | null;
  takeover: boolean;
  limits_ms: number;
}

/** What create_payout() puts in DETAIL when it refuses over a limit (and rolls back). */
interface LimitRefusal {
  limit: "CLIENT_RATE" | "ACCOUNT_DAILY_AMOUNT";
  used: string | null;
  limit_value: string | null;
  resets_at: string;
  limits_ms: number;
}

/** SQLSTATE of create_payout()'s refusal over a money limit: the statement rolled back. */
const OVER_A_LIMIT = "RF429";

/**
 * SQLSTATE raised when the key was claimed by another request between the statement's read and
 * its pin (only a request of the stepwise path can do that): the statement rolled back.
 */
export const KEY_TAKEN_MEANWHILE = "RF409";

export function createPayoutStatement(pool: Pool) {
  return {
    /** Start-up check: paydb has migration 022 (a clear exit beats failing every create). */
    async checkReady(): Promise<void> {
      const { rows } = await pool.query<{ ok: boolean }>(
        "SELECT to_regprocedure('create_payout(text, text, bytea, bigint, text, text, bigint, text, text, text, text, bytea, bigint, bigint, numeric, bigint)') IS NOT NULL AS ok",
      );
      if (rows[0]?.ok !== true) throw new Error("paydb schema is not migrated: create_payout() is missing (run: node dist/services/migrate/main.js paydb)");
    },

    async run(p: CreatePayoutStatementParams): Promise<CreatePayoutStatementOutcome> {
      // Named: prepared once per connection (every CreatePayout runs it).
      let rows: StatementRow[];
      try {
        ({ rows } = await pool.query<StatementRow>({
          name: "payouts_create_payout",
          text: "SELECT * FROM create_payout($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
          values: [
            p.clientId,
            p.key,
            p.fingerprint,
            p.retentionMs,
            p.payoutId,
            p.accountId,
            p.amountMinor.toString(),
            p.currency,
            p.beneficiary,
            p.clientReference,
            p.traceparent,
            Buffer.from(p.responseHead),
            p.rateLimit,
            p.rateWindowMs,
            p.amountLimit === null ? null : p.amountLimit.toString(),
            p.limitsLockWaitMs,
          ],
        }));
      } catch (err) {
        const e = err as { code?: unknown; detail?: string };
        if (e?.code !== OVER_A_LIMIT || !e.detail) throw err;
        const d = JSON.parse(e.detail) as LimitRefusal;
        return {
          kind: "exceeded",
          limit: d.limit,
          used: int8(d.used ?? "0"),
          limitValue: int8(d.limit_value ?? "0"),
          resetsAt: new Date(d.resets_at),
          limitsMs: d.limits_ms,
        };
      }
      const r = rows[0]!;
      switch (r.outcome) {
        case "CREATED":
          return { kind: "created", response: r.response!, expiresAt: r.expires_at!, takeover: r.takeover, limitsMs: r.limits_ms };
        case "REPLAY":
          return { kind: "replay", response: r.response!, expiresAt: r.expires_at! };
        case "REUSED":
          return { kind: "reused", expiresAt: r.expires_at! };
        case "CONFLICT":
          return { kind: "conflict", retryAfterMs: r.retry_after_ms ?? 1000 };
      }
    },
  };
}

export type CreatePayoutStatement = ReturnType<typeof createPayoutStatement>;
