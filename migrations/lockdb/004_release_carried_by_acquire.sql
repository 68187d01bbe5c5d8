-- A release carried by the next acquire's commit (decision 074): the releases a lock service has
-- answered nobody about yet leave with its next group of acquire attempts, in ONE statement and
-- ONE commit, instead of one commit of their own each.
--
-- lock_step_batch runs, for each item in the order given, exactly what a group of one of its kind
-- runs: lock_release_batch or lock_acquire_batch (migration 003) on that single item. So the
-- rules are those functions' and nothing here restates them; an item sees what the items before
-- it wrote (a release of key k ordered before an acquire of k frees it for that acquire, as two
-- statements one after the other would).
--
-- The caller orders the items by key (stable, releases of a key before its acquires), the same
-- order every other group uses, so two statements running at once lock the keys' rows in one
-- order and cannot deadlock on them. Like the other groups, what fails an item fails the whole
-- statement, and every caller in it hears it.
--
-- Returns one row per item, with its 1-based position (`ord`): an acquire's columns of
-- lock_acquire_batch, a release's of lock_release_batch, the other kind's NULL.
CREATE FUNCTION lock_step_batch(p_kinds text[], p_keys text[], p_lease_hashes bytea[], p_owners text[], p_ttls_ms float8[])
  RETURNS TABLE (ord int, token text, expires_at timestamptz, holder_ms float8, released boolean, mine boolean)
  LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  n int := coalesce(array_length(p_keys, 1), 0);
BEGIN
  IF n = 0 OR array_length(p_kinds, 1) IS DISTINCT FROM n OR array_length(p_lease_hashes, 1) IS DISTINCT FROM n
     OR array_length(p_owners, 1) IS DISTINCT FROM n OR array_length(p_ttls_ms, 1) IS DISTINCT FROM n THEN
    RAISE EXCEPTION 'lock_step_batch: % keys and arrays of other lengths', n USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1..n LOOP
    ord := i; token := NULL; expires_at := NULL; holder_ms := NULL; released := NULL; mine := NULL;
    IF p_kinds[i] = 'acquire' THEN
      SELECT a.token, a.expires_at, a.holder_ms INTO token, expires_at, holder_ms
        FROM lock_acquire_batch(ARRAY[p_keys[i]], ARRAY[p_lease_hashes[i]], ARRAY[p_owners[i]], ARRAY[p_ttls_ms[i]]) a;
    ELSIF p_kinds[i] = 'release' THEN
      SELECT r.released, r.mine INTO released, mine
        FROM lock_release_batch(ARRAY[p_keys[i]], ARRAY[p_lease_hashes[i]]) r;
    ELSE
      RAISE EXCEPTION 'lock_step_batch: item % is a %, not an acquire or a release', i, p_kinds[i] USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;

-- Least privilege, as 003: only the lock service runs it, with the caller's rights.
REVOKE ALL ON FUNCTION lock_step_batch(text[], text[], bytea[], text[], float8[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lock_step_batch(text[], text[], bytea[], text[], float8[]) TO railfence_lock;
