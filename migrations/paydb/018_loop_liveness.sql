-- Backlog and liveness signals (decisions 060 and 061).
--
-- 1. The reconciler runs as a CronJob: one pass, then exit. Its own /metrics lives for seconds
--    and is not scraped, so "when did it last finish a pass" is kept here, one row, and the
--    payouts service (long-running, scraped) exports it. A single row, upserted: the table never
--    grows. pass_at only moves forward (GREATEST), so a slow pass finishing after a faster one
--    cannot make the record look older than it is.
CREATE TABLE reconciler_last_pass (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  pass_at     timestamptz NOT NULL,
  passes      bigint NOT NULL DEFAULT 1 CHECK (passes >= 1)
);

REVOKE ALL ON reconciler_last_pass FROM PUBLIC;
-- The reconciler upserts its row (INSERT ... ON CONFLICT DO UPDATE needs SELECT and UPDATE too).
GRANT SELECT, INSERT ON reconciler_last_pass TO railfence_reconciler;
GRANT UPDATE (pass_at, passes) ON reconciler_last_pass TO railfence_reconciler;
-- The payouts service exports it (railfence_reconciler_last_pass_timestamp_seconds); the audit may read it.
GRANT SELECT ON reconciler_last_pass TO railfence_payouts, railfence_auditor;

-- 2. The payouts service counts the payouts not yet final, per state, at scrape time (cached for a
--    few seconds). payouts_pending_idx (001) covers PENDING and PROCESSING only; UNKNOWN and
--    NEEDS_ATTENTION would need a scan of every payout ever made. This index holds the waiting
--    rows only, so the count reads as many entries as there are payouts waiting.
CREATE INDEX payouts_backlog_idx ON payouts (state, created_at) WHERE state IN ('PENDING', 'PROCESSING', 'UNKNOWN', 'NEEDS_ATTENTION');
