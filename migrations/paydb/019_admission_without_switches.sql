-- The admission statement has no switches (decision 064).
--
-- Until now rail_admit() took p_mark_guard, p_binding_guard and p_one_live_guard, and the one-live
-- index applied only to rows flagged one_live_guarded: the harness's negative controls lived in
-- the production schema, and only a file-system check in the services kept them off. Here every
-- guard is unconditional, and the ledger refuses a row that says a guard did not apply. A negative
-- control now installs its own unguarded statement into the harness's throwaway database
-- (tools/harness/sql/unguarded-admission.sql); production never has it.
--
-- A ledger that holds rows written with a guard off (a harness database, never a deployment)
-- fails this migration loudly instead of being rewritten.

DROP FUNCTION rail_admit(text, text, text, bigint, bigint, text, text, text, boolean, boolean, boolean);

-- One statement, one round trip, one implicit transaction. Returns one row: ADMITTED, FENCED_OUT,
-- PAYOUT_NOT_FOUND, PAYOUT_MISMATCH (detail: the field), PAYOUT_NOT_PAYABLE (detail: the state) or
-- PAYOUT_FENCE_MISMATCH (detail: NEWER or OLDER). A refusal writes nothing. A second submission
-- under the same reference (rail_submissions_pkey) or a second live one of the payout
-- (rail_submissions_one_live_per_payout) raises unique_violation, and the whole statement, mark
-- advance included, rolls back.
CREATE FUNCTION rail_admit(
    p_reference text, p_payout_id text, p_account_id text, p_token bigint,
    p_amount_minor bigint, p_currency text, p_beneficiary text, p_replica_id text)
  RETURNS TABLE (outcome text, detail text)
  LANGUAGE plpgsql AS $$
DECLARE
  po record;
  refusal text;
  refusal_detail text;
BEGIN
  -- The payout binding (C3 §3.9). FOR SHARE: an executor re-fencing the payout
  -- meanwhile waits for this admission to commit, and a re-fence committed before it is what
  -- this check sees.
  -- [rule:payout-binding]
  SELECT p.account_id, p.amount_minor, p.currency, p.beneficiary, p.state, p.fence INTO po
    FROM payouts p WHERE p.payout_id = p_payout_id FOR SHARE;
  IF NOT FOUND THEN refusal := 'PAYOUT_NOT_FOUND';
  ELSIF po.account_id <> p_account_id THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'account_id';
  ELSIF po.amount_minor <> p_amount_minor THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'amount_minor';
  ELSIF po.currency <> p_currency THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'currency';
  ELSIF po.beneficiary <> p_beneficiary THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'beneficiary';
  ELSIF po.state <> 'PROCESSING' THEN refusal := 'PAYOUT_NOT_PAYABLE'; refusal_detail := po.state;
  -- [rule:binding-fence]
  ELSIF po.fence <> p_token THEN
    -- NEWER: a later holder owns the payout (the caller is stale); OLDER: the caller never fenced it.
    refusal := 'PAYOUT_FENCE_MISMATCH'; refusal_detail := CASE WHEN po.fence > p_token THEN 'NEWER' ELSE 'OLDER' END;
  END IF;
  IF refusal IS NOT NULL THEN
    -- ADR-007's order still decides what the caller hears: a token at or below the mark is
    -- FENCED_OUT first. (Read here only to choose the reason; nothing is written.)
    IF EXISTS (SELECT 1 FROM rail_high_water h WHERE h.account_id = p_account_id AND h.mark >= p_token) THEN
      RETURN QUERY SELECT 'FENCED_OUT'::text, NULL::text;
    ELSE
      RETURN QUERY SELECT refusal, refusal_detail;
    END IF;
    RETURN;
  END IF;
  -- [/rule:payout-binding]

  -- [rule:admit-sql]
  -- Step 1 (D2, D3): advance the account's mark only if the token is strictly greater;
  -- not advanced: FENCED_OUT, nothing written.
  INSERT INTO rail_high_water AS h (account_id, mark) VALUES (p_account_id, p_token)
    ON CONFLICT (account_id) DO UPDATE SET mark = EXCLUDED.mark, updated_at = now()
    -- [rule:d2-strictly-greater]
    WHERE h.mark < EXCLUDED.mark;
  -- [rule:d2-not-advanced]
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'FENCED_OUT'::text, NULL::text;
    RETURN;
  END IF;

  -- Steps 2-3: the intent, committed with the mark before anything is forwarded.
  -- [rule:d3-intent]
  INSERT INTO rail_submissions
    (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id,
     mark_advanced, payout_bound)
  VALUES (p_reference, p_payout_id, p_account_id, p_token, p_amount_minor, p_currency, p_beneficiary, 'FORWARDING', p_replica_id,
     true, true);
  RETURN QUERY SELECT 'ADMITTED'::text, NULL::text;
  -- [/rule:admit-sql]
END $$;

-- One live submission per payout, for every row: the index no longer asks whether
-- a guard applied. Live = anything that may have moved money or may still move it, unless an
-- operator re-opened it (migration 011).
DROP INDEX rail_submissions_one_live_per_payout;
-- [rule:one-live-index]
-- [rule:one-live]
CREATE UNIQUE INDEX rail_submissions_one_live_per_payout ON rail_submissions (bound_payout_id)
  WHERE state NOT IN ('REJECTED', 'NOT_FORWARDED') AND reopened_at IS NULL;
-- [/rule:one-live]

-- A row that records a guard not applied is refused by the ledger itself, whoever writes it.
ALTER TABLE rail_submissions
  -- [rule:d7-ledger-refuses]
  ADD CONSTRAINT rail_submissions_admitted_by_the_fence CHECK (mark_advanced AND payout_bound);

-- The flag the old index read goes; the ledger's guard is redefined without it (the same rules
-- as migrations 007 and 011, one column fewer in what never changes).
CREATE OR REPLACE FUNCTION rail_submissions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'rail_submissions rows are never deleted (%)', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF TG_OP = 'INSERT' THEN
    IF NEW.state <> 'FORWARDING' OR NEW.resolved_at IS NOT NULL OR NEW.late_answered_at IS NOT NULL OR NEW.contradicted_at IS NOT NULL THEN
      RAISE EXCEPTION 'an intent is recorded as FORWARDING, before the rail is called (%: %)', NEW.payout_id, NEW.state
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF (NEW.payout_id, NEW.bound_payout_id, NEW.account_id, NEW.fencing_token, NEW.amount_minor, NEW.currency, NEW.beneficiary,
      NEW.replica_id, NEW.mark_advanced, NEW.payout_bound, NEW.created_at)
     IS DISTINCT FROM
     (OLD.payout_id, OLD.bound_payout_id, OLD.account_id, OLD.fencing_token, OLD.amount_minor, OLD.currency, OLD.beneficiary,
      OLD.replica_id, OLD.mark_advanced, OLD.payout_bound, OLD.created_at) THEN
    RAISE EXCEPTION 'what an intent pays, and under which token and reference, never changes (%)', OLD.payout_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.state IS DISTINCT FROM OLD.state AND NOT (
       (OLD.state = 'FORWARDING' AND NEW.state IN ('ACCEPTED', 'REJECTED', 'TIMEOUT', 'NOT_FORWARDED', 'RESOLVED_PAID', 'RESOLVED_NOT_PAID'))
    OR (OLD.state = 'TIMEOUT' AND NEW.state IN ('ACCEPTED', 'REJECTED', 'RESOLVED_PAID', 'RESOLVED_NOT_PAID'))) THEN
    RAISE EXCEPTION 'submission % may not go from % to %', OLD.payout_id, OLD.state, NEW.state
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  -- A clear answer is final; a resolution, a late answer and a contradiction are written once.
  IF OLD.state IN ('ACCEPTED', 'REJECTED', 'NOT_FORWARDED') AND NEW IS DISTINCT FROM OLD THEN
    RAISE EXCEPTION 'submission % is final (%)', OLD.payout_id, OLD.state USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.resolved_at IS NOT NULL AND (NEW.state, NEW.previous_state, NEW.resolution_outcome, NEW.resolution_actor, NEW.resolution_note, NEW.resolved_at, NEW.rail_reference)
     IS DISTINCT FROM (OLD.state, OLD.previous_state, OLD.resolution_outcome, OLD.resolution_actor, OLD.resolution_note, OLD.resolved_at, OLD.rail_reference) THEN
    RAISE EXCEPTION 'the resolution of % is recorded once', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.late_answered_at IS NOT NULL AND (NEW.late_answer_state, NEW.late_rail_reference, NEW.late_rail_reason, NEW.late_answered_at)
     IS DISTINCT FROM (OLD.late_answer_state, OLD.late_rail_reference, OLD.late_rail_reason, OLD.late_answered_at) THEN
    RAISE EXCEPTION 'the late answer of % is recorded once', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.contradicted_at IS NOT NULL AND (NEW.contradicted_at, NEW.contradicting_rail_reference, NEW.contradiction_actor)
     IS DISTINCT FROM (OLD.contradicted_at, OLD.contradicting_rail_reference, OLD.contradiction_actor) THEN
    RAISE EXCEPTION 'the contradiction of % is recorded once', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;

ALTER TABLE rail_submissions DROP COLUMN one_live_guarded;
