-- Lock group commit (decision 070): the acquire attempts, renewals and releases a lock service
-- receives while its previous statement of the same kind is in lockdb run together, in ONE
-- statement and ONE commit.
--
-- Each function runs, for each item in the order given, exactly the statement a single call runs:
-- every item is its own statement inside the function, so it sees what the items before it wrote
-- (a key twice in one group: the second finds the first's grant and is told the holder's
-- remaining time, as two statements one after the other would be). now() is the group's
-- transaction start, the same instant for every item of it.
--
-- The caller orders the items by key (stable: arrival order within a key), so two groups running
-- at once lock the keys' rows in the same order and cannot deadlock on them.
--
-- The items are not isolated from each other by subtransactions: the request checks
-- (lock-validation.ts) admit no key, owner or ttl that the statements refuse, so what fails an item
-- (lockdb unreachable, statement timeout) fails the whole group, and each caller hears it.
--
-- Each returns one row per item, with its 1-based position (`ord`).

-- Acquire: grants when the key's lease is released or expired (a new token, GREATEST(stored
-- token, floor) + 1, so the per-key counter only grows); otherwise the holder's remaining time
-- by this database's clock (holder_ms), or no answer at all when the row is not visible yet.
-- [rule:lock-acquire]
CREATE FUNCTION lock_acquire_batch(p_keys text[], p_lease_hashes bytea[], p_owners text[], p_ttls_ms float8[])
  RETURNS TABLE (ord int, token text, expires_at timestamptz, holder_ms float8)
  LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  n int := coalesce(array_length(p_keys, 1), 0);
  k text;
BEGIN
  IF n = 0 OR array_length(p_lease_hashes, 1) IS DISTINCT FROM n OR array_length(p_owners, 1) IS DISTINCT FROM n
     OR array_length(p_ttls_ms, 1) IS DISTINCT FROM n THEN
    RAISE EXCEPTION 'lock_acquire_batch: % keys and arrays of other lengths', n USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1..n LOOP
    k := p_keys[i];
    ord := i; token := NULL; expires_at := NULL; holder_ms := NULL;
    WITH granted AS (
      INSERT INTO locks AS l (key, token, lease_hash, owner, granted_at, expires_at)
      VALUES (k, (SELECT floor FROM lock_token_floor) + 1, p_lease_hashes[i], p_owners[i], now(),
              now() + make_interval(secs => p_ttls_ms[i] / 1000))
      ON CONFLICT (key) DO UPDATE
         SET token = GREATEST(l.token, (SELECT floor FROM lock_token_floor)) + 1,
             lease_hash = EXCLUDED.lease_hash, owner = EXCLUDED.owner,
             granted_at = EXCLUDED.granted_at, expires_at = EXCLUDED.expires_at, released_at = NULL
       WHERE l.released_at IS NOT NULL OR l.expires_at <= now()
      RETURNING l.token, l.expires_at)
    SELECT g.token::text, g.expires_at, NULL::float8 FROM granted g
    UNION ALL
    SELECT NULL, NULL, GREATEST(0, EXTRACT(EPOCH FROM (h.expires_at - now())) * 1000)::float8
      FROM locks h WHERE h.key = k AND NOT EXISTS (SELECT 1 FROM granted)
    INTO token, expires_at, holder_ms;
    RETURN NEXT;
  END LOOP;
END $$;
-- [/rule:lock-acquire]

-- Renew: extends a live lease whose id matches; no token for an expired, released or superseded one.
CREATE FUNCTION lock_renew_batch(p_keys text[], p_lease_hashes bytea[], p_ttls_ms float8[])
  RETURNS TABLE (ord int, token text, owner text, expires_at timestamptz)
  LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  n int := coalesce(array_length(p_keys, 1), 0);
BEGIN
  IF n = 0 OR array_length(p_lease_hashes, 1) IS DISTINCT FROM n OR array_length(p_ttls_ms, 1) IS DISTINCT FROM n THEN
    RAISE EXCEPTION 'lock_renew_batch: % keys and arrays of other lengths', n USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1..n LOOP
    ord := i; token := NULL; owner := NULL; expires_at := NULL;
    UPDATE locks l SET expires_at = now() + make_interval(secs => p_ttls_ms[i] / 1000)
     WHERE l.key = p_keys[i] AND l.lease_hash = p_lease_hashes[i] AND l.released_at IS NULL AND l.expires_at > now()
    RETURNING l.token::text, l.owner, l.expires_at INTO token, owner, expires_at;
    RETURN NEXT;
  END LOOP;
END $$;

-- Release: ends a live lease whose id matches, and says whether the id was the key's latest lease
-- (released: it ended now; mine and not released: it had ended already; neither: not its lease).
CREATE FUNCTION lock_release_batch(p_keys text[], p_lease_hashes bytea[])
  RETURNS TABLE (ord int, released boolean, mine boolean)
  LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  n int := coalesce(array_length(p_keys, 1), 0);
BEGIN
  IF n = 0 OR array_length(p_lease_hashes, 1) IS DISTINCT FROM n THEN
    RAISE EXCEPTION 'lock_release_batch: % keys and arrays of other lengths', n USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1..n LOOP
    ord := i;
    WITH latest AS (SELECT l.lease_hash = p_lease_hashes[i] AS mine FROM locks l WHERE l.key = p_keys[i]),
    ended AS (
      UPDATE locks l SET released_at = now()
       WHERE l.key = p_keys[i] AND l.lease_hash = p_lease_hashes[i] AND l.released_at IS NULL AND l.expires_at > now()
      RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM ended), COALESCE((SELECT latest.mine FROM latest), false)
    INTO released, mine;
    RETURN NEXT;
  END LOOP;
END $$;

-- Least privilege (002_service_roles.sql): only the lock service runs them. They run with the
-- caller's rights, so they can do nothing its table grants do not already allow.
REVOKE ALL ON FUNCTION lock_acquire_batch(text[], bytea[], text[], float8[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION lock_renew_batch(text[], bytea[], float8[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION lock_release_batch(text[], bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lock_acquire_batch(text[], bytea[], text[], float8[]) TO railfence_lock;
GRANT EXECUTE ON FUNCTION lock_renew_batch(text[], bytea[], float8[]) TO railfence_lock;
GRANT EXECUTE ON FUNCTION lock_release_batch(text[], bytea[]) TO railfence_lock;
