-- The payout row's own guard (SPEC C1 §1.6, INV-07). Executors are untrusted, and their role may
-- write a payout's fence and state: without this, a compromised executor could set a FAILED
-- payout back to PROCESSING under its own token, and the proxy's binding would then admit paying
-- it; or lower a fence so that a stale token passes. So, whoever asks:
--   - the fence never decreases;
--   - states move only forward: PENDING -> PROCESSING -> PAID | FAILED | UNKNOWN | NEEDS_ATTENTION,
--     UNKNOWN -> PAID | FAILED | NEEDS_ATTENTION, and PAID | FAILED -> NEEDS_ATTENTION (the rail
--     contradicted the recorded outcome);
--   - a finished payout (PAID, FAILED, NEEDS_ATTENTION) is reopened, or a NEEDS_ATTENTION one
--     closed, only by the table's owner: the operator's decision, never a service's.
CREATE FUNCTION payouts_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  by_owner boolean := pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER');
BEGIN
  IF NEW.fence < OLD.fence THEN
    RAISE EXCEPTION 'payout % fence would decrease from % to %', OLD.payout_id, OLD.fence, NEW.fence USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF (NEW.payout_id, NEW.client_id, NEW.account_id, NEW.amount_minor, NEW.currency, NEW.beneficiary, NEW.created_at)
     IS DISTINCT FROM (OLD.payout_id, OLD.client_id, OLD.account_id, OLD.amount_minor, OLD.currency, OLD.beneficiary, OLD.created_at)
     AND NOT by_owner THEN
    RAISE EXCEPTION 'what payout % pays never changes', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT by_owner AND NOT (
       (OLD.state = 'PENDING' AND NEW.state IN ('PROCESSING', 'PAID', 'FAILED', 'UNKNOWN', 'NEEDS_ATTENTION'))
    OR (OLD.state = 'PROCESSING' AND NEW.state IN ('PAID', 'FAILED', 'UNKNOWN', 'NEEDS_ATTENTION'))
    OR (OLD.state = 'UNKNOWN' AND NEW.state IN ('PAID', 'FAILED', 'NEEDS_ATTENTION'))
    OR (OLD.state IN ('PAID', 'FAILED') AND NEW.state = 'NEEDS_ATTENTION')) THEN
    RAISE EXCEPTION 'payout % may not go from % to % (only the owner reopens or closes a finished payout)', OLD.payout_id, OLD.state, NEW.state
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER payouts_guarded BEFORE UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_guard();

CREATE FUNCTION payouts_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'payouts are never deleted' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER payouts_no_delete BEFORE DELETE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_refuse_delete();
CREATE TRIGGER payouts_no_truncate BEFORE TRUNCATE ON payouts FOR EACH STATEMENT EXECUTE FUNCTION payouts_refuse_delete();
