/**
 * Fail-closed money limits on CreatePayout (RESILIENCE.md principle 3 and its "fail-closed
 * money limits" row): a per-client request rate and a per-client-and-account amount per
 * currency per UTC day, both kept in a shared store (paydb by default) so every replica enforces one budget.
 *
 * The rules, and why:
 * - Limits are consumed only by a request that claimed its Idempotency-Key (it is about to
 *   create a payout). A replay of a stored success is never refused and never counted again; a
 *   request refused for any reason consumes nothing.
 * - Consumption happens before the payout transaction, both limits or neither, in one round
 *   trip. A payout therefore never exists without its consumption. It is given back only when
 *   the payout provably was not created (the transaction rolled back, or our IN_PROGRESS
 *   marker could still be deleted); when that is unknown it stays counted: a failure can cost
 *   budget, never add money movement.
 * - Store unreachable (or slower than LIMITS_TIMEOUT_MS plus the lock waits): refuse with
 *   `unavailable` LIMITS_UNAVAILABLE and a retry hint; nothing was executed and the key is free
 *   again. Counted and paged on.
 * - A counter held by other requests (one client hammering one account) is waited for up to
 *   LIMITS_LOCK_WAIT_MS, then refused `unavailable` LIMITS_CONTENDED with a short retry hint: that is
 *   load, not an outage, and pages nobody.
 * - The daily amount is per client and account (migration 016): a client spends, and a refusal
 *   reports, only its own budget.
 *   Reads never touch the limit store.
 * - Over a limit: `resource_exhausted` with the limit's reason, usage metadata and RetryInfo
 *   until its window ends; a single payout larger than the whole daily limit gets no retry hint
 *   (waiting cannot help).
 */
import { DomainError, REASONS, unavailable } from "../shared/domain/errors.js";
import { int8 } from "../shared/domain/int8.js";

/** Limits of one payouts deployment (config.ts reads them). */
export interface LimitsConfig {
  /** CreatePayout executions per client per window; 0 = off. */
  clientRequests: number;
  clientWindowMs: number;
  /** Daily amount (minor units) per account, by currency; "*" for every other one; null = off. */
  accountDailyAmount: Readonly<Record<string, bigint | null>>;
}

/** The daily amount limit for a currency (null = off). "*" is required by config, so always defined. */
export function dailyAmountLimit(cfg: LimitsConfig, currency: string): bigint | null {
  const own = cfg.accountDailyAmount[currency];
  if (own !== undefined) return own;
  return cfg.accountDailyAmount["*"] ?? null;
}

/**
 * Parses LIMIT_ACCOUNT_DAILY_AMOUNT: `CUR=N` or `CUR=off`, comma-separated, with a required
 * `*=N|off` for every currency not named (a currency nobody configured must not be unlimited
 * by accident). Throws a message on a bad value.
 */
export function parseDailyAmounts(text: string): Record<string, bigint | null> {
  const out: Record<string, bigint | null> = {};
  for (const part of text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p.length > 0)) {
    const m = /^(\*|[A-Z]{3})=(off|\d{1,19})$/.exec(part);
    if (!m) throw new Error(`"${part}" is not CUR=<minor units> or CUR=off (CUR: ISO-4217 upper case, or *)`);
    if (m[1]! in out) throw new Error(`${m[1]} is given twice`);
    out[m[1]!] = m[2] === "off" ? null : int8(m[2]!);
  }
  if (!("*" in out)) throw new Error('name a limit for every other currency with "*=<minor units>" (or "*=off")');
  return out;
}

/** Which windows a successful consumption used (for a refund). */
export interface Consumption {
  rateWindow: Date | null;
  dayWindow: Date | null;
}

/** What the store answered. */
export type LimitDecision =
  | { kind: "ok"; consumption: Consumption }
  | { kind: "exceeded"; limit: "CLIENT_RATE" | "ACCOUNT_DAILY_AMOUNT"; used: bigint; limitValue: bigint; resetsAt: Date };

/** The refusal a client sees for an exceeded limit. */
export function limitExceeded(
  d: Extract<LimitDecision, { kind: "exceeded" }>,
  req: { accountId: string; currency: string; amountMinor: bigint },
  now = Date.now(),
): DomainError {
  const resets = d.resetsAt.toISOString();
  if (d.limit === "CLIENT_RATE") {
    return new DomainError(
      REASONS.CLIENT_RATE_LIMITED,
      `too many payouts from this client in the current window (limit ${d.limitValue}); retry after ${resets} with the same idempotency-key`,
      { limit: "client_rate", limit_value: d.limitValue.toString(), used: d.used.toString(), resets_at: resets },
      Math.max(1, d.resetsAt.getTime() - now),
    );
  }
  // A payout larger than the whole day's limit can never pass: a final refusal with its own
  // reason and a code no retry middleware repeats (decision 053), and no retry hint.
  const never = req.amountMinor > d.limitValue;
  return new DomainError(
    never ? REASONS.PAYOUT_ABOVE_DAILY_LIMIT : REASONS.ACCOUNT_DAILY_LIMIT_EXCEEDED,
    never
      ? `this payout alone exceeds this client's daily limit on the account for ${req.currency} (${d.limitValue} minor units)`
      : `this client's daily limit on the account for ${req.currency} (${d.limitValue} minor units) would be exceeded; it resets at ${resets}`,
    {
      limit: "account_daily_amount",
      account_id: req.accountId,
      currency: req.currency,
      limit_value: d.limitValue.toString(),
      used: d.used.toString(),
      requested: req.amountMinor.toString(),
      resets_at: resets,
    },
    never ? undefined : Math.max(1, d.resetsAt.getTime() - now),
  );
}

/** A counter stayed locked by other requests past LIMITS_LOCK_WAIT_MS: retry shortly, same key. */
export function limitsContended(cause: unknown): DomainError {
  return new DomainError(
    REASONS.LIMITS_CONTENDED,
    "too many concurrent payouts for this client and account; nothing was executed. Retry shortly with the same idempotency-key",
    {},
    500,
    { cause },
  );
}

/** The store could not answer: money movement refuses (fail closed); reads are unaffected. */
export function limitsUnavailable(cause: unknown): DomainError {
  return unavailable(
    REASONS.LIMITS_UNAVAILABLE,
    "the money-limit store is unavailable; nothing was executed. Retry with the same idempotency-key",
    1000,
    cause,
  );
}
