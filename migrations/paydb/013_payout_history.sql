-- Every payout change, appended by paydb itself (issue: "an audit that looks away"). The daily
-- audit windowed payouts on created_at: a payout two days old set FAILED after it was paid, or
-- PAID with a forged reference, was never looked at again. Now `railfence check --since T`
-- examines every payout changed since T, by this history.
--
-- Written by a trigger that runs as the table's owner (SECURITY DEFINER): no service role may
-- write, change or delete it (none is granted anything but the auditor's SELECT), and a row
-- records which login made the change (session_user), so a write by the wrong component shows.
CREATE TABLE payout_history (
  id          bigserial PRIMARY KEY,
  payout_id   text NOT NULL,
  old_state   text,
  new_state   text NOT NULL,
  old_fence   bigint,
  new_fence   bigint NOT NULL,
  rail_reference text,
  changed_by  text NOT NULL,
  changed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX payout_history_changed_idx ON payout_history (changed_at);
CREATE INDEX payout_history_payout_idx ON payout_history (payout_id, id);

CREATE FUNCTION payouts_record_history() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND (NEW.state, NEW.fence, NEW.rail_reference) IS NOT DISTINCT FROM (OLD.state, OLD.fence, OLD.rail_reference) THEN
    RETURN NULL;  -- a claim, a note: not a change the audit judges
  END IF;
  INSERT INTO payout_history (payout_id, old_state, new_state, old_fence, new_fence, rail_reference, changed_by)
  VALUES (NEW.payout_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
          CASE WHEN TG_OP = 'UPDATE' THEN OLD.fence END, NEW.fence, NEW.rail_reference, session_user);
  RETURN NULL;
END $$;

CREATE TRIGGER payouts_history AFTER INSERT OR UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_record_history();

-- The history of the payouts that exist today, as one row each (their current state): so a
-- check over a window that starts before this migration still finds them.
INSERT INTO payout_history (payout_id, old_state, new_state, old_fence, new_fence, rail_reference, changed_by, changed_at)
SELECT payout_id, NULL, state, NULL, fence, rail_reference, 'migration 013', updated_at FROM payouts;

CREATE FUNCTION payout_history_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'payout_history is append-only' USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE TRIGGER payout_history_append_only BEFORE UPDATE OR DELETE ON payout_history
  FOR EACH ROW EXECUTE FUNCTION payout_history_refuse_change();
CREATE TRIGGER payout_history_no_truncate BEFORE TRUNCATE ON payout_history
  FOR EACH STATEMENT EXECUTE FUNCTION payout_history_refuse_change();

REVOKE ALL ON payout_history FROM PUBLIC;
REVOKE ALL ON SEQUENCE payout_history_id_seq FROM PUBLIC;
REVOKE ALL ON FUNCTION payouts_record_history() FROM PUBLIC;
GRANT SELECT ON payout_history TO railfence_auditor;

-- 006's comment on submission_ref is stale (a migration cannot be edited once applied): it is
-- written with the outcome, not the fence, and nothing decides by it.
COMMENT ON COLUMN payouts.submission_ref IS
  'The reference of the submission whose outcome the payout records (written with the outcome by the executor). Informational: the reconciler applies a resolution by fence <= the submission''s token, never by this column.';
