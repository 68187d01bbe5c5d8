-- What a service role may write into a payout, bounded by the database (issue: "an executor role
-- that can park payouts"; SPEC C3 §3.9, INV-07). Executors are untrusted; so is a compromised
-- payouts pod. 009 keeps fences rising and states moving forward; this adds:
--   - the payouts role inserts only new payouts as a client asked for them: PENDING, fence 0,
--     no claim or outcome, timestamps the server's (column grants, and the insert guard below);
--   - a claim is a hint of at most 15 minutes (an executor's is at most LEASE_TTL_MS +
--     CALL_TIMEOUT_MS, 12 minutes with the largest settings): a claim 'infinity' would keep a
--     payout from every executor for ever;
--   - a payout becomes UNKNOWN only while one of its submissions is ambiguous and unresolved
--     (TIMEOUT, or FORWARDING): UNKNOWN is the reconciler's work list, and an UNKNOWN payout with
--     nothing to reconcile would be parked for ever.
-- The owner (migrations, an operator's repair) is not bound by any of it.

-- ---- inserts --------------------------------------------------------------------------------
REVOKE INSERT ON payouts FROM railfence_payouts;
GRANT INSERT (payout_id, client_id, account_id, amount_minor, currency, beneficiary, client_reference, traceparent)
  ON payouts TO railfence_payouts;

CREATE FUNCTION payouts_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
    RETURN NEW;
  END IF;
  IF NEW.state <> 'PENDING' OR NEW.fence <> 0 OR NEW.claimed_by IS NOT NULL OR NEW.claimed_until IS NOT NULL
     OR NEW.rail_reference IS NOT NULL OR NEW.failure_reason IS NOT NULL OR NEW.submission_ref IS NOT NULL
     OR NEW.attention_reason IS NOT NULL THEN
    RAISE EXCEPTION 'a new payout is PENDING with fence 0, no claim and no outcome (%)', NEW.payout_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  NEW.created_at := now();
  NEW.updated_at := now();
  RETURN NEW;
END $$;

CREATE TRIGGER payouts_insert_guarded BEFORE INSERT ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_insert_guard();

-- ---- claims and UNKNOWN ------------------------------------------------------------------------
-- Read as the owner: the executor's role may not read the ledger, but its writes are checked
-- against it. Answers only "is there an open ambiguity for this payout".
CREATE FUNCTION payout_has_open_ambiguity(p_payout_id text) RETURNS boolean
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
  SELECT EXISTS (SELECT 1 FROM rail_submissions
                  WHERE bound_payout_id = p_payout_id AND state IN ('TIMEOUT', 'FORWARDING'))
$$;
REVOKE ALL ON FUNCTION payout_has_open_ambiguity(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION payout_has_open_ambiguity(text) TO railfence_executor, railfence_reconciler, railfence_rail_proxy;

CREATE FUNCTION payouts_write_bounds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
    RETURN NEW;
  END IF;
  IF NEW.claimed_until IS DISTINCT FROM OLD.claimed_until AND NEW.claimed_until > now() + interval '15 minutes' THEN
    RAISE EXCEPTION 'payout % may be claimed for at most 15 minutes (asked until %)', OLD.payout_id, NEW.claimed_until
      USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.state = 'UNKNOWN' AND OLD.state IS DISTINCT FROM 'UNKNOWN' AND NOT payout_has_open_ambiguity(OLD.payout_id) THEN
    RAISE EXCEPTION 'payout % is UNKNOWN only while one of its submissions is ambiguous', OLD.payout_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER payouts_write_bounded BEFORE UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_write_bounds();
