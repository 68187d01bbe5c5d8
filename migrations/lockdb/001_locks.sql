-- Leases for the pg lock backend (services/lock/pg-backend.ts).
--
-- One row per key lives for ever: `token` is the per-key fencing counter and only grows. A
-- released or expired lease keeps its row (released_at set, or expires_at in the past), so the
-- counter survives and the last holder can still be recognised (an idempotent second Release).
-- Expiry is judged by this database's clock (now()), never by a caller's.
CREATE TABLE locks (
  key         text PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 200),
  -- Highest token ever issued for this key.
  token       bigint NOT NULL CHECK (token > 0),
  -- SHA-256 of the latest lease id: the id is a capability, so a database dump must not hand it out.
  lease_hash  bytea NOT NULL CHECK (length(lease_hash) = 32),
  owner       text NOT NULL,
  granted_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  released_at timestamptz
);

-- Tokens never go backwards, whatever a future statement tries.
CREATE FUNCTION locks_token_never_decreases() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.token < OLD.token THEN
    RAISE EXCEPTION 'fencing token of % would decrease from % to %', OLD.key, OLD.token, NEW.token
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER locks_token_monotonic BEFORE UPDATE OF token ON locks
  FOR EACH ROW EXECUTE FUNCTION locks_token_never_decreases();

-- Waiting acquires LISTEN on this channel so a release wakes them at once (delivered on commit).
-- Expiry has no event: waiters also sleep until the holder's expires_at.
CREATE FUNCTION locks_notify_released() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('railfence_lock_released', NEW.key);
  RETURN NULL;
END $$;

CREATE TRIGGER locks_released AFTER UPDATE OF released_at ON locks
  FOR EACH ROW WHEN (NEW.released_at IS NOT NULL AND OLD.released_at IS NULL)
  EXECUTE FUNCTION locks_notify_released();

-- The token floor (LOCK_TOKEN_FLOOR) as a ratchet: the service raises it at start and it never
-- goes down, so restarting with a smaller or missing floor after a backend switch cannot issue
-- tokens below those the previous backend issued.
CREATE TABLE lock_token_floor (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  floor      bigint NOT NULL CHECK (floor >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO lock_token_floor (floor) VALUES (0);

CREATE FUNCTION lock_token_floor_never_decreases() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.floor < OLD.floor THEN
    RAISE EXCEPTION 'token floor would decrease from % to %', OLD.floor, NEW.floor USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER lock_token_floor_monotonic BEFORE UPDATE ON lock_token_floor
  FOR EACH ROW EXECUTE FUNCTION lock_token_floor_never_decreases();
