-- Executors are told about payable payouts, not left to find them by polling (decision 069).
--
-- "Becomes payable" means: the row now matches the executors' claim (state PENDING or PROCESSING,
-- and no live claim: claimed_until NULL or already past), and before this statement it did not.
-- So it is announced when
--   - a payout is created PENDING (the payouts API; a batch of them in one transaction);
--   - a claim is given back at once: an executor abandoning a payout on drain (retry after 0), or
--     an operator's reopen_payout (011: FAILED or NEEDS_ATTENTION back to PENDING, claim cleared).
-- It is NOT announced when
--   - an executor claims or fences a payout (claimed_until moves into the future);
--   - a claim is deferred to a later time (deferClaim with a retry delay): nothing changes in the
--     row when that time comes, so nothing could announce it then. The deferring executor's own
--     poll finds it, as does any other executor's;
--   - a claim lapses (its executor died or stalled): time passing writes no row either.
-- Those two are what the executors' slow poll (POLL_INTERVAL_MS) is still for. A notification is
-- a hint, never a guarantee: it is delivered on commit to whoever listens at that moment, and a
-- listener that was disconnected misses it. Claims stay FOR UPDATE SKIP LOCKED; nothing here is
-- a guard.
--
-- The payload is empty on purpose: PostgreSQL delivers identical notifications of one transaction
-- once, so a transaction creating 500 payouts wakes each executor once, and every executor claims
-- across accounts anyway (an account id would only defeat that folding).
--
-- Runs as the writer (the payouts role, an executor giving a claim back, the owner reopening):
-- pg_notify needs no privilege, and LISTEN needs none either, so no grant changes. The WHEN clauses
-- keep the function out of every other write (claims, fences, outcomes): they cost one comparison.
CREATE FUNCTION payouts_announce_payable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('railfence_payout_payable', '');
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION payouts_announce_payable() FROM PUBLIC;

CREATE TRIGGER payouts_payable_created AFTER INSERT ON payouts
  FOR EACH ROW WHEN (NEW.state = 'PENDING' AND (NEW.claimed_until IS NULL OR NEW.claimed_until <= now()))
  EXECUTE FUNCTION payouts_announce_payable();

CREATE TRIGGER payouts_payable_released AFTER UPDATE OF state, claimed_until ON payouts
  FOR EACH ROW WHEN (
    NEW.state IN ('PENDING', 'PROCESSING') AND (NEW.claimed_until IS NULL OR NEW.claimed_until <= now())
    AND NOT (OLD.state IN ('PENDING', 'PROCESSING') AND (OLD.claimed_until IS NULL OR OLD.claimed_until <= now())))
  EXECUTE FUNCTION payouts_announce_payable();
