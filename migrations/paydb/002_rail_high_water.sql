-- The proxy's per-account high-water mark (C1 §1.5, ADR-007 D2/D5/D6). Advanced only by one
-- conditional statement (INSERT .. ON CONFLICT DO UPDATE .. WHERE mark < EXCLUDED.mark),
-- in the same transaction that records the intent. Never read-then-write, never cached.
CREATE TABLE rail_high_water (
  account_id text PRIMARY KEY,
  mark       bigint NOT NULL CHECK (mark > 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Belt and braces for INV-05: the database itself refuses any write that does not raise the
-- mark, and refuses deletes (a deleted mark is restart amnesia, ADR-007 failure i).
CREATE FUNCTION rail_high_water_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'rail_high_water rows are never deleted (account %)', OLD.account_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.account_id IS DISTINCT FROM OLD.account_id THEN
    RAISE EXCEPTION 'rail_high_water.account_id is immutable' USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.mark <= OLD.mark THEN
    RAISE EXCEPTION 'rail_high_water mark for % must increase (% -> %)', OLD.account_id, OLD.mark, NEW.mark
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER rail_high_water_monotonic
  BEFORE UPDATE OR DELETE ON rail_high_water
  FOR EACH ROW EXECUTE FUNCTION rail_high_water_guard();

CREATE FUNCTION rail_high_water_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'rail_high_water is never truncated' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER rail_high_water_no_truncate
  BEFORE TRUNCATE ON rail_high_water
  FOR EACH STATEMENT EXECUTE FUNCTION rail_high_water_refuse_truncate();

-- Audit history of every advance, written by the database (not by the proxy), so the drill
-- checker can prove from recorded history that marks never decreased and that every admitted
-- token advanced its account's mark.
CREATE TABLE rail_high_water_log (
  id         bigserial PRIMARY KEY,
  account_id text NOT NULL,
  old_mark   bigint,
  new_mark   bigint NOT NULL,
  logged_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX rail_high_water_log_account_idx ON rail_high_water_log (account_id, id);

CREATE FUNCTION rail_high_water_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rail_high_water_log (account_id, old_mark, new_mark)
  VALUES (NEW.account_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.mark END, NEW.mark);
  RETURN NULL;
END $$;

CREATE TRIGGER rail_high_water_audit
  AFTER INSERT OR UPDATE ON rail_high_water
  FOR EACH ROW EXECUTE FUNCTION rail_high_water_audit();
