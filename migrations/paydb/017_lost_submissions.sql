-- A submission whose answer was lost and whose intent paydb then did not know (NOT_FOUND): the
-- proxy may have died before its admission committed (nothing was sent), or paydb may have
-- forgotten a committed intent (a failover to a standby that had not received it, a restore to an
-- earlier point) after the rail was called. The executor cannot tell which, so it never takes
-- NOT_FOUND as "not sent": it records the reference and the time here, and the payout is paid
-- again only once the rail's own statement, covering long enough after that time, shows nothing
-- for it (services/executor/forgotten-intent.ts; decision 023). Numbered 017: 015-016 are taken
-- by the payouts API's migrations.
ALTER TABLE payouts
  ADD COLUMN lost_submission_ref text CHECK (lost_submission_ref IS NULL OR length(lost_submission_ref) BETWEEN 1 AND 200),
  ADD COLUMN lost_submission_at timestamptz,
  ADD CONSTRAINT payouts_lost_submission_both CHECK ((lost_submission_ref IS NULL) = (lost_submission_at IS NULL));
GRANT UPDATE (lost_submission_ref, lost_submission_at) ON payouts TO railfence_executor;
