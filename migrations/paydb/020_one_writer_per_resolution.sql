-- One writer per fact on the reconciliation path (decision 066).
--
-- A resolution closes its payout in the statement that resolves the submission (rail-proxy's
-- ResolveSubmission), as late answers and contradictions already did: there is no moment where
-- a submission is resolved and its payout still waits for a second write by someone else. The
-- fence rule stays in that statement's SQL (a NOT_PAID verdict fails a PROCESSING payout only
-- when no newer holder fenced it since). The proxy's sweeper closes the rest in SQL: an UNKNOWN
-- payout whose submissions are all closed (an executor wrote UNKNOWN while the resolution was
-- committing, or a late rail answer closed a stale submission).
--
-- So the reconciler writes no payout row any more: it loses UPDATE on payouts. The one payout
-- fact it still owns, "the rail paid this payout with no intent on the ledger" (decision 037),
-- goes through payout_paid_without_intent below, which can do that and nothing else.

-- rail-proxy closes payouts: the outcome columns, and the claim it ends.
GRANT UPDATE (rail_reference, failure_reason, claimed_by, claimed_until) ON payouts TO railfence_rail_proxy;

-- The reconciler reads payouts; it writes none.
REVOKE UPDATE ON payouts FROM railfence_reconciler;

-- A payment on the rail's statement names this payout and paydb holds no intent for it (paydb
-- lost acknowledged commits): the payout is PAID when it was still open, and a payout the books
-- say FAILED goes to a human (its client may have paid it again). A payout with an ambiguous
-- submission is left alone: that is the reconciler's first pass's, and a human's if the statement
-- shows another payment. Returns the state it left the payout in, or NULL when nothing changed.
-- Runs as the owner (the reconciler holds no UPDATE), so it is its own bound: only these two
-- moves, nothing else about the row. payout_history still records the reconciler's login.
CREATE FUNCTION payout_paid_without_intent(p_payout_id text, p_rail_reference text) RETURNS text
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  after text;
BEGIN
  IF p_rail_reference IS NULL OR length(p_rail_reference) NOT BETWEEN 1 AND 128 THEN
    RAISE EXCEPTION 'a rail reference of 1-128 characters names the payment' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF payout_has_open_ambiguity(p_payout_id) THEN
    RETURN NULL;
  END IF;
  UPDATE payouts SET state = 'PAID', rail_reference = p_rail_reference, failure_reason = NULL,
         claimed_by = NULL, claimed_until = NULL, updated_at = now()
   WHERE payout_id = p_payout_id AND state IN ('UNKNOWN', 'PROCESSING', 'PENDING')
  RETURNING state INTO after;
  IF after IS NOT NULL THEN
    RETURN after;
  END IF;
  UPDATE payouts SET state = 'NEEDS_ATTENTION', attention_reason = 'PAID_BUT_FAILED',
         attention_detail = 'the rail paid it (' || p_rail_reference || ') but the payout was FAILED',
         attention_at = now(), updated_at = now()
   WHERE payout_id = p_payout_id AND state = 'FAILED'
  RETURNING state INTO after;
  RETURN after;
END $$;
REVOKE ALL ON FUNCTION payout_paid_without_intent(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION payout_paid_without_intent(text, text) TO railfence_reconciler;
