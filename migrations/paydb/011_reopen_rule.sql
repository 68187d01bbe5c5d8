-- Only a proven not-sent re-opens a payout (issue: "verdicts taken as proof").
--
-- A payout may be submitted again only after a submission that provably did not pay:
-- NOT_FORWARDED (the rail was never called) or REJECTED (the rail answered the status its protocol
-- documents as a final refusal; an answer with any other status is recorded TIMEOUT, never
-- REJECTED: services/shared/domain/rail-status.ts). RESOLVED_NOT_PAID is a judgement (the statement's
-- silence after the settlement window, or an operator's word): the reconciler keeps watching it for
-- a week precisely because it can be wrong. So it no longer ends a submission's "live" status: a
-- payout closed NOT_PAID is not payable again, unless an operator re-opens it explicitly
-- (reopen_payout below: owner only, with an actor and a reason, recorded on the submission).

ALTER TABLE rail_submissions
  ADD COLUMN reopened_at   timestamptz,
  ADD COLUMN reopen_actor  text,
  ADD COLUMN reopen_reason text,
  ADD CONSTRAINT rail_submissions_reopen_recorded CHECK (
    (reopened_at IS NULL AND reopen_actor IS NULL AND reopen_reason IS NULL)
    OR (reopened_at IS NOT NULL AND length(btrim(reopen_actor)) > 0 AND length(btrim(reopen_reason)) >= 10));

-- History written under the old rule: a NOT_PAID verdict that a later submission of the same
-- payout already went past. Recorded as re-opened by this migration (honestly named), so the new
-- index describes the ledger as it is; nothing else is rewritten.
ALTER TABLE rail_submissions DISABLE TRIGGER rail_submissions_guarded;
UPDATE rail_submissions r
   SET reopened_at = now(), reopen_actor = 'migration 011',
       reopen_reason = 'submitted again before RESOLVED_NOT_PAID stopped re-opening a payout'
 WHERE r.state = 'RESOLVED_NOT_PAID'
   AND EXISTS (SELECT 1 FROM rail_submissions later
                WHERE later.bound_payout_id = r.bound_payout_id AND later.created_at > r.created_at);
ALTER TABLE rail_submissions ENABLE TRIGGER rail_submissions_guarded;

DO $$
DECLARE dup text;
BEGIN
  SELECT string_agg(bound_payout_id, ', ') INTO dup FROM (
    SELECT bound_payout_id FROM rail_submissions
     WHERE state NOT IN ('REJECTED', 'NOT_FORWARDED') AND reopened_at IS NULL
     GROUP BY bound_payout_id HAVING count(*) > 1 LIMIT 20) d;
  IF dup IS NOT NULL THEN
    RAISE EXCEPTION 'payouts with more than one live submission under the re-open rule (investigate before migrating): %', dup;
  END IF;
END $$;

DROP INDEX rail_submissions_one_live_per_payout;
CREATE UNIQUE INDEX rail_submissions_one_live_per_payout ON rail_submissions (bound_payout_id)
  WHERE one_live_guarded AND state NOT IN ('REJECTED', 'NOT_FORWARDED') AND reopened_at IS NULL;

-- The ledger's guard, extended: a re-opening is recorded once, on a RESOLVED_NOT_PAID row only.
-- (No service role is granted these columns: only the owner writes them, through reopen_payout.)
CREATE FUNCTION rail_submissions_reopen_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.reopened_at, NEW.reopen_actor, NEW.reopen_reason) IS DISTINCT FROM (OLD.reopened_at, OLD.reopen_actor, OLD.reopen_reason) THEN
    IF OLD.reopened_at IS NOT NULL THEN
      RAISE EXCEPTION 'the re-opening of % is recorded once', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF OLD.state <> 'RESOLVED_NOT_PAID' OR NEW.state <> 'RESOLVED_NOT_PAID' THEN
      RAISE EXCEPTION 'only a RESOLVED_NOT_PAID submission is re-opened (% is %)', OLD.payout_id, OLD.state
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER rail_submissions_reopen_guarded
  BEFORE UPDATE ON rail_submissions
  FOR EACH ROW EXECUTE FUNCTION rail_submissions_reopen_guard();

-- The operator's re-opening of a payout closed NOT_PAID: every RESOLVED_NOT_PAID submission of it
-- is marked re-opened (actor, reason, time), and the payout goes back to PENDING so an executor
-- pays it under a new token. Refused unless the payout is FAILED or NEEDS_ATTENTION, none of its
-- submissions is live, paid or contradicted, and at least one was resolved NOT_PAID. Runs with the caller's rights: only the owner (who alone may
-- reopen a finished payout, 009) can do it; EXECUTE is not granted to any service role.
CREATE FUNCTION reopen_payout(p_payout_id text, p_actor text, p_reason text)
  RETURNS TABLE (reopened_submissions integer)
  LANGUAGE plpgsql AS $$
DECLARE
  po record;
  n integer;
BEGIN
  IF p_actor IS NULL OR length(btrim(p_actor)) = 0 THEN
    RAISE EXCEPTION 're-opening a payout needs the actor' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_reason IS NULL OR length(btrim(p_reason)) < 10 THEN
    RAISE EXCEPTION 're-opening a payout needs a reason (at least 10 characters)' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO po FROM payouts WHERE payout_id = p_payout_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no payout %', p_payout_id USING ERRCODE = 'no_data_found';
  END IF;
  IF po.state NOT IN ('FAILED', 'NEEDS_ATTENTION') THEN
    RAISE EXCEPTION 'payout % is %: only a FAILED or NEEDS_ATTENTION payout is re-opened', p_payout_id, po.state
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  IF EXISTS (SELECT 1 FROM rail_submissions WHERE bound_payout_id = p_payout_id
              AND (state NOT IN ('REJECTED', 'NOT_FORWARDED', 'RESOLVED_NOT_PAID') OR late_answer_state = 'ACCEPTED'
                   OR contradicted_at IS NOT NULL)) THEN
    RAISE EXCEPTION 'payout % has a submission that is live, paid, or contradicted by the rail: not re-opened', p_payout_id
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  UPDATE rail_submissions SET reopened_at = clock_timestamp(), reopen_actor = p_actor, reopen_reason = p_reason
   WHERE bound_payout_id = p_payout_id AND state = 'RESOLVED_NOT_PAID' AND reopened_at IS NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN
    -- A rail refusal is final (the client creates a new payout); only a judgement is re-opened.
    RAISE EXCEPTION 'payout % has no NOT_PAID resolution to re-open', p_payout_id USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  UPDATE payouts SET state = 'PENDING', claimed_by = NULL, claimed_until = NULL, rail_reference = NULL, failure_reason = NULL,
                     attention_reason = NULL, attention_detail = NULL, attention_at = NULL, updated_at = now()
   WHERE payout_id = p_payout_id;
  RETURN QUERY SELECT n;
END $$;

REVOKE ALL ON FUNCTION reopen_payout(text, text, text) FROM PUBLIC;
