-- Money safety beyond ADR-007's five rules (SPEC C3 §3.9): the intent ledger binds every
-- submission to its payout and holds at most one live submission per payout, records a rail
-- answer that arrives after a resolution and a NOT_PAID verdict the statement later
-- contradicts, and is protected like the marks (no delete, immutable keys, allowed transitions
-- only). Payouts a human must look at are NEEDS_ATTENTION, with the reason.

-- ---- payouts: attention -------------------------------------------------------------------
ALTER TABLE payouts DROP CONSTRAINT payouts_state_check;
ALTER TABLE payouts ADD CONSTRAINT payouts_state_check
  CHECK (state IN ('PENDING', 'PROCESSING', 'PAID', 'FAILED', 'UNKNOWN', 'NEEDS_ATTENTION'));
-- attention_reason is set when something about the payout needs a human (a late rail answer, a
-- contradicted resolution, a refusal no retry can cure). state = NEEDS_ATTENTION when nobody may
-- act on it any more until a human decides (its recorded outcome is contradicted, or paying it
-- is stuck); a consistent late answer only flags it.
ALTER TABLE payouts
  ADD COLUMN attention_reason text,
  ADD COLUMN attention_detail text,
  ADD COLUMN attention_at     timestamptz;
ALTER TABLE payouts ADD CONSTRAINT payouts_attention_has_reason
  CHECK (state <> 'NEEDS_ATTENTION' OR attention_reason IS NOT NULL);
CREATE INDEX payouts_attention_idx ON payouts (attention_at) WHERE attention_reason IS NOT NULL;

-- ---- rail_submissions: binding, one live submission, late answers, contradictions ----------
ALTER TABLE rail_submissions DROP CONSTRAINT rail_submissions_state_check;
-- NOT_FORWARDED: admitted, then given up before the rail call started (the pre-forward budget
-- passed): provably not paid.
ALTER TABLE rail_submissions ADD CONSTRAINT rail_submissions_state_check
  CHECK (state IN ('FORWARDING', 'ACCEPTED', 'REJECTED', 'TIMEOUT', 'RESOLVED_PAID', 'RESOLVED_NOT_PAID', 'NOT_FORWARDED'));
ALTER TABLE rail_submissions
  -- The payout this submission pays. payout_id is the reference the caller presented (the
  -- payout id, or `<payout id>:t<token>`); services/shared/domain/submission-ref.ts maps one to the other.
  ADD COLUMN bound_payout_id  text,
  -- false only when a harness negative control removed that guard for this admission.
  ADD COLUMN payout_bound     boolean NOT NULL DEFAULT true,
  ADD COLUMN one_live_guarded boolean NOT NULL DEFAULT true,
  -- Milliseconds from sending the admission statement to starting the rail call (the proxy's
  -- own clock), written with the outcome: the evidence for the pre-forward budget.
  ADD COLUMN forward_delay_ms integer,
  -- A rail answer that arrived after the row was resolved: recorded, never dropped.
  ADD COLUMN late_answer_state text CHECK (late_answer_state IN ('ACCEPTED', 'REJECTED')),
  ADD COLUMN late_rail_reference text,
  ADD COLUMN late_rail_reason text,
  ADD COLUMN late_answered_at timestamptz,
  -- A NOT_PAID resolution that the rail's statement later contradicted (reconciler watch).
  ADD COLUMN contradicted_at timestamptz,
  ADD COLUMN contradicting_rail_reference text,
  ADD COLUMN contradiction_actor text;
UPDATE rail_submissions SET bound_payout_id = regexp_replace(payout_id, ':t[0-9]+$', '');
ALTER TABLE rail_submissions ALTER COLUMN bound_payout_id SET NOT NULL;

-- Refuse to migrate a ledger that already holds two live submissions of one payout: that is a
-- double payment (or one in flight) for a human to look at, not something to index around.
DO $$
DECLARE dup text;
BEGIN
  SELECT string_agg(bound_payout_id, ', ') INTO dup FROM (
    SELECT bound_payout_id FROM rail_submissions
     WHERE state NOT IN ('REJECTED', 'RESOLVED_NOT_PAID', 'NOT_FORWARDED')
     GROUP BY bound_payout_id HAVING count(*) > 1 LIMIT 20) d;
  IF dup IS NOT NULL THEN
    RAISE EXCEPTION 'payouts with more than one live submission (investigate before migrating): %', dup;
  END IF;
END $$;

-- One live submission per payout, whatever reference it came under. Live = anything that may
-- have moved money or may still move it. Only REJECTED, RESOLVED_NOT_PAID and NOT_FORWARDED
-- submissions may precede another one. A unique index, not a check in the admission query:
-- uniqueness is decided against committed rows, so two concurrent admissions cannot both pass.
CREATE UNIQUE INDEX rail_submissions_one_live_per_payout ON rail_submissions (bound_payout_id)
  WHERE one_live_guarded AND state NOT IN ('REJECTED', 'RESOLVED_NOT_PAID', 'NOT_FORWARDED');
CREATE INDEX rail_submissions_payout_idx ON rail_submissions (bound_payout_id, created_at);
-- The reconciler keeps watching its NOT_PAID verdicts.
CREATE INDEX rail_submissions_not_paid_idx ON rail_submissions (resolved_at, payout_id) WHERE state = 'RESOLVED_NOT_PAID';

-- ---- the ledger's own guard ---------------------------------------------------------------
CREATE FUNCTION rail_submissions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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
      NEW.replica_id, NEW.mark_advanced, NEW.payout_bound, NEW.one_live_guarded, NEW.created_at)
     IS DISTINCT FROM
     (OLD.payout_id, OLD.bound_payout_id, OLD.account_id, OLD.fencing_token, OLD.amount_minor, OLD.currency, OLD.beneficiary,
      OLD.replica_id, OLD.mark_advanced, OLD.payout_bound, OLD.one_live_guarded, OLD.created_at) THEN
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

CREATE TRIGGER rail_submissions_guarded
  BEFORE INSERT OR UPDATE OR DELETE ON rail_submissions
  FOR EACH ROW EXECUTE FUNCTION rail_submissions_guard();

CREATE FUNCTION rail_submissions_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'rail_submissions is never truncated' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER rail_submissions_no_truncate
  BEFORE TRUNCATE ON rail_submissions
  FOR EACH STATEMENT EXECUTE FUNCTION rail_submissions_refuse_truncate();

-- ---- admission: steps 1-3 of C3 §3.5 plus the binding, in one statement --------------------
-- `SELECT * FROM rail_admit(...)` is one round trip and one implicit transaction. Returns one row:
-- outcome ADMITTED, FENCED_OUT, PAYOUT_NOT_FOUND, PAYOUT_MISMATCH (detail: the field),
-- PAYOUT_NOT_PAYABLE (detail: the state) or PAYOUT_FENCE_MISMATCH (detail: NEWER or OLDER). A refusal writes nothing. A
-- second submission under the same reference (rail_submissions_pkey) or a second live one of
-- the payout (rail_submissions_one_live_per_payout) raises unique_violation, and the whole
-- statement, mark advance included, rolls back.
--
-- The p_*_guard parameters are the harness negative controls (each removes one guard alone,
-- and the row records which guards applied); production passes true for all of them.
CREATE FUNCTION rail_admit(
    p_reference text, p_payout_id text, p_account_id text, p_token bigint,
    p_amount_minor bigint, p_currency text, p_beneficiary text, p_replica_id text,
    p_mark_guard boolean, p_binding_guard boolean, p_one_live_guard boolean)
  RETURNS TABLE (outcome text, detail text)
  LANGUAGE plpgsql AS $$
DECLARE
  po record;
  refusal text;
  refusal_detail text;
  advanced boolean;
BEGIN
  -- Binding (§3.9). FOR SHARE: an executor re-fencing the payout meanwhile waits for this
  -- admission to commit, and a re-fence committed before it is what this check sees.
  IF p_binding_guard THEN
    SELECT p.account_id, p.amount_minor, p.currency, p.beneficiary, p.state, p.fence INTO po
      FROM payouts p WHERE p.payout_id = p_payout_id FOR SHARE;
    IF NOT FOUND THEN refusal := 'PAYOUT_NOT_FOUND';
    ELSIF po.account_id <> p_account_id THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'account_id';
    ELSIF po.amount_minor <> p_amount_minor THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'amount_minor';
    ELSIF po.currency <> p_currency THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'currency';
    ELSIF po.beneficiary <> p_beneficiary THEN refusal := 'PAYOUT_MISMATCH'; refusal_detail := 'beneficiary';
    ELSIF po.state <> 'PROCESSING' THEN refusal := 'PAYOUT_NOT_PAYABLE'; refusal_detail := po.state;
    ELSIF po.fence <> p_token THEN
      -- NEWER: a later holder owns the payout (the caller is stale); OLDER: the caller never fenced it.
      refusal := 'PAYOUT_FENCE_MISMATCH'; refusal_detail := CASE WHEN po.fence > p_token THEN 'NEWER' ELSE 'OLDER' END;
    END IF;
    IF refusal IS NOT NULL THEN
      -- ADR-007's order still decides what the caller hears: a token at or below the mark is
      -- FENCED_OUT first. (Read here only to choose the reason; nothing is written.)
      IF p_mark_guard AND EXISTS (SELECT 1 FROM rail_high_water h WHERE h.account_id = p_account_id AND h.mark >= p_token) THEN
        RETURN QUERY SELECT 'FENCED_OUT'::text, NULL::text;
      ELSE
        RETURN QUERY SELECT refusal, refusal_detail;
      END IF;
      RETURN;
    END IF;
  END IF;

  -- Step 1 (D2, D3): advance the account's mark only if the token is strictly greater.
  INSERT INTO rail_high_water AS h (account_id, mark) VALUES (p_account_id, p_token)
    ON CONFLICT (account_id) DO UPDATE SET mark = EXCLUDED.mark, updated_at = now()
    WHERE h.mark < EXCLUDED.mark;
  advanced := FOUND;
  IF p_mark_guard AND NOT advanced THEN
    RETURN QUERY SELECT 'FENCED_OUT'::text, NULL::text;
    RETURN;
  END IF;

  -- Steps 2-3: the intent, committed with the mark before anything is forwarded.
  INSERT INTO rail_submissions
    (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id,
     mark_advanced, payout_bound, one_live_guarded)
  VALUES (p_reference, p_payout_id, p_account_id, p_token, p_amount_minor, p_currency, p_beneficiary, 'FORWARDING', p_replica_id,
     advanced, p_binding_guard, p_one_live_guard);
  RETURN QUERY SELECT 'ADMITTED'::text, NULL::text;
END $$;

-- The mark's audit log is written by the database as the table owner, so no service role needs
-- (or has) the right to write history.
ALTER FUNCTION rail_high_water_audit() SECURITY DEFINER SET search_path = pg_catalog, public;
