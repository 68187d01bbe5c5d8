/**
 * Before/after evidence for "invalid input changes nothing": row counts and mark sums of every
 * table a request could touch, read straight from the databases (never from the services).
 */
import pg from "pg";

async function one(url: string, sql: string): Promise<Record<string, string>> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<Record<string, string>>(sql)).rows[0]!;
  } finally {
    await c.end();
  }
}

/** paydb: marks (count, sum, history), intents, payouts, idempotency keys. */
export function paydbState(url: string): Promise<Record<string, string>> {
  return one(
    url,
    `SELECT (SELECT count(*) FROM rail_high_water)::text AS marks,
            (SELECT coalesce(sum(mark), 0) FROM rail_high_water)::text AS mark_sum,
            (SELECT count(*) FROM rail_high_water_log)::text AS mark_advances,
            (SELECT count(*) FROM rail_submissions)::text AS submissions,
            (SELECT count(*) FROM rail_submissions WHERE resolved_at IS NOT NULL)::text AS resolved,
            (SELECT count(*) FROM payouts)::text AS payouts,
            (SELECT count(*) FROM idempotency_keys)::text AS idempotency_keys`,
  );
}

/** raildb: the rail's own ledger (the INV-02 truth). */
export function raildbState(url: string): Promise<Record<string, string>> {
  return one(url, "SELECT count(*)::text AS payments, coalesce(max(sequence), 0)::text AS last_sequence FROM payments");
}

/** lockdb: leases and tokens. */
export function lockdbState(url: string): Promise<Record<string, string>> {
  return one(
    url,
    "SELECT count(*)::text AS locks, coalesce(sum(token), 0)::text AS token_sum, coalesce(string_agg(md5(lease_hash::text), ',' ORDER BY key), '') AS leases FROM locks",
  );
}
