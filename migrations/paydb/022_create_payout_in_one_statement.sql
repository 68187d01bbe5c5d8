-- CreatePayout in one statement, one transaction, one durable commit (decision 071). Before it,
-- a new payout took three commits: the key's IN_PROGRESS claim, the limit consumption, then the
-- payout with its pinned answer. create_payout() settles the Idempotency-Key, consumes the money
-- limits with the very rules of consume_payout_limits (it calls it), inserts the PENDING payout
-- and pins the answer to the key, all or nothing.
--
-- Concurrency without waiting: a request holds a transaction-scoped advisory lock on its
-- (client, key) while it runs, taken with pg_try_: a second request with the same key does not
-- queue behind the first, it answers at once from what it can read (the stored answer, a reused
-- key, or IDEMPOTENCY_CONFLICT). The lock is a 32-bit hash of the key in its own class (the
-- two-integer form never meets the single-bigint locks the migration runner uses): two different
-- keys colliding while both are in flight costs one retryable conflict, never a second payout.
-- The uniqueness of the key row stays the guarantee: a request that finds the key taken by
-- anyone else when it pins the answer rolls everything back (SQLSTATE RF409).
--
-- The stored answer is the binary CreatePayoutResponse. The caller passes everything it knows
-- (p_response_head: the response without the payout's two timestamps); paydb alone knows when
-- the payout was created, so it appends a second encoding of field `payout` holding only
-- created_at and updated_at. Protobuf merges repeated occurrences of a message field, so the
-- stored bytes parse to the whole answer, and every replay answers with those same bytes.
-- Timestamps are cut to milliseconds, as the payouts service reads them from a row.
--
-- The limits come last (see step 5). Their lock wait (LIMITS_LOCK_WAIT_MS) applies to the counters only: lock_timeout is set
-- around consume_payout_limits and put back after it, so a lock-timeout error (55P03) always
-- means a contended counter.

-- Unsigned base-128 varint, the protobuf wire encoding of a non-negative integer.
CREATE FUNCTION payouts_pb_varint(p_value bigint) RETURNS bytea
  LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, public AS $$
DECLARE
  v_out bytea := '\x'::bytea;
  v_rest bigint := p_value;
BEGIN
  IF v_rest < 0 THEN
    RAISE EXCEPTION 'a varint here is never negative (%)', p_value;
  END IF;
  LOOP
    IF v_rest < 128 THEN
      RETURN v_out || set_byte('\x00'::bytea, 0, v_rest::int);
    END IF;
    v_out := v_out || set_byte('\x00'::bytea, 0, ((v_rest & 127) | 128)::int);
    v_rest := v_rest >> 7;
  END LOOP;
END $$;

-- CreatePayoutResponse { payout: Payout { created_at: t, updated_at: t } } in protobuf binary,
-- t cut to milliseconds (google.protobuf.Timestamp: 1 seconds, 2 nanos; Payout: 9 created_at,
-- 10 updated_at; CreatePayoutResponse: 1 payout).
CREATE FUNCTION payouts_pb_created_at(p_at timestamptz) RETURNS bytea
  LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog, public AS $$
DECLARE
  v_ms bigint := floor(extract(epoch FROM p_at) * 1000)::bigint;
  v_seconds bigint := floor(v_ms / 1000.0)::bigint;
  v_nanos bigint := (v_ms - v_seconds * 1000) * 1000000;
  v_ts bytea;
  v_payout bytea;
BEGIN
  v_ts := '\x08'::bytea || payouts_pb_varint(v_seconds);
  IF v_nanos <> 0 THEN
    v_ts := v_ts || '\x10'::bytea || payouts_pb_varint(v_nanos);
  END IF;
  v_payout := '\x4a'::bytea || payouts_pb_varint(length(v_ts)) || v_ts
           || '\x52'::bytea || payouts_pb_varint(length(v_ts)) || v_ts;
  RETURN '\x0a'::bytea || payouts_pb_varint(length(v_payout)) || v_payout;
END $$;

-- One CreatePayout. Answers one row; outcome:
--   CREATED   the payout exists and its answer (response) is pinned to the key until expires_at;
--   REPLAY    the key holds a success for this body: response and expires_at are the stored ones;
--   REUSED    the key is bound to another body until expires_at; nothing written;
--   CONFLICT  another request with this key is running; retry_after_ms; nothing written;
-- Over a money limit it raises RF429 instead (the figures consume_payout_limits answers, as JSON
-- in the error's DETAIL): the statement rolls back, so there is no key, no payout, no usage.
-- takeover: the key had a dead row (a success past retention, or a marker whose lease ended)
-- that this request replaced. limits_ms: time spent consuming the limits (for the metric).
CREATE FUNCTION create_payout(
  p_client text, p_key text, p_fingerprint bytea, p_retention_ms bigint,
  p_payout_id text, p_account text, p_amount bigint, p_currency text, p_beneficiary text,
  p_client_reference text, p_traceparent text, p_response_head bytea,
  p_rate_limit bigint, p_rate_window_ms bigint, p_amount_limit numeric, p_limits_lock_wait_ms bigint)
RETURNS TABLE (outcome text, response bytea, expires_at timestamptz, retry_after_ms float8, takeover boolean, limits_ms float8)
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
#variable_conflict use_column
DECLARE
  v_row record;
  v_takeover boolean := false;
  v_limits record;
  v_limits_started timestamptz;
  v_limits_ms float8 := 0;
  v_lock_timeout text;
  v_created_at timestamptz;
  v_response bytea;
  v_expires timestamptz;
BEGIN
  -- 1. One request per key at a time, and nobody waits for it.
  IF NOT pg_try_advisory_xact_lock(1920167987, hashtext(p_client || '/' || p_key)) THEN
    SELECT k.state, k.fingerprint, k.response, k.expires_at, k.expires_at > now() AS live,
           coalesce(k.locked_until > now(), false) AS locked,
           greatest(0, coalesce(extract(epoch FROM k.locked_until - now()) * 1000, 0))::float8 AS lock_remaining_ms
      INTO v_row FROM idempotency_keys k WHERE k.client_id = p_client AND k.idempotency_key = p_key;
    IF FOUND AND ((v_row.state = 'DONE' AND v_row.live) OR (v_row.state = 'IN_PROGRESS' AND v_row.locked)) THEN
      IF v_row.fingerprint <> p_fingerprint THEN
        RETURN QUERY SELECT 'REUSED'::text, NULL::bytea, v_row.expires_at, NULL::float8, false, 0::float8;
        RETURN;
      END IF;
      IF v_row.state = 'DONE' THEN
        RETURN QUERY SELECT 'REPLAY'::text, v_row.response, v_row.expires_at, NULL::float8, false, 0::float8;
        RETURN;
      END IF;
      RETURN QUERY SELECT 'CONFLICT'::text, NULL::bytea, NULL::timestamptz, least(1000, greatest(100, ceil(v_row.lock_remaining_ms)))::float8,
        false, 0::float8;
      RETURN;
    END IF;
    -- No row yet (the other request has not committed), or a dead one it is replacing.
    RETURN QUERY SELECT 'CONFLICT'::text, NULL::bytea, NULL::timestamptz, 1000::float8, false, 0::float8;
    RETURN;
  END IF;

  -- 2. What the key means (a plain read: a fresh snapshot, taken after the lock).
  SELECT k.state, k.fingerprint, k.response, k.expires_at, k.expires_at > now() AS live,
         coalesce(k.locked_until > now(), false) AS locked,
         greatest(0, coalesce(extract(epoch FROM k.locked_until - now()) * 1000, 0))::float8 AS lock_remaining_ms
    INTO v_row FROM idempotency_keys k WHERE k.client_id = p_client AND k.idempotency_key = p_key;
  IF FOUND THEN
    IF (v_row.state = 'DONE' AND v_row.live) OR (v_row.state = 'IN_PROGRESS' AND v_row.locked) THEN
      IF v_row.fingerprint <> p_fingerprint THEN
        RETURN QUERY SELECT 'REUSED'::text, NULL::bytea, v_row.expires_at, NULL::float8, false, 0::float8;
        RETURN;
      END IF;
      -- A replay is answered here: never refused by, nor counted against, a money limit.
      IF v_row.state = 'DONE' THEN
        RETURN QUERY SELECT 'REPLAY'::text, v_row.response, v_row.expires_at, NULL::float8, false, 0::float8;
        RETURN;
      END IF;
      -- A marker of the stepwise path (a separate limit store) still within its lease.
      RETURN QUERY SELECT 'CONFLICT'::text, NULL::bytea, NULL::timestamptz, least(1000, greatest(100, ceil(v_row.lock_remaining_ms)))::float8,
        false, 0::float8;
      RETURN;
    END IF;
    -- A success past retention or a crashed attempt's marker: the key is free again, for any body.
    v_takeover := true;
  END IF;

  -- 3. The payout (payouts_insert_guard sets its timestamps to now()).
  INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, client_reference, traceparent, idempotency_key)
  VALUES (p_payout_id, p_client, p_account, p_amount, p_currency, p_beneficiary, p_client_reference, p_traceparent, p_key)
  RETURNING created_at INTO v_created_at;
  v_response := p_response_head || payouts_pb_created_at(v_created_at);

  -- 4. The answer pinned to the key. Only a free or dead key row is written: a key claimed
  -- meanwhile by anyone else (a stepwise request) rolls the whole statement back.
  INSERT INTO idempotency_keys AS k (client_id, idempotency_key, fingerprint, state, response, payout_id, claim_id, locked_until, created_at, expires_at)
  VALUES (p_client, p_key, p_fingerprint, 'DONE', v_response, p_payout_id, NULL, NULL, now(), now() + make_interval(secs => p_retention_ms::float8 / 1000))
  ON CONFLICT (client_id, idempotency_key) DO UPDATE
     SET fingerprint = EXCLUDED.fingerprint, state = 'DONE', response = EXCLUDED.response, payout_id = EXCLUDED.payout_id,
         claim_id = NULL, locked_until = NULL, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
   WHERE (k.state = 'DONE' AND k.expires_at <= now()) OR (k.state = 'IN_PROGRESS' AND k.locked_until <= now())
  RETURNING k.expires_at INTO v_expires;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idempotency key claimed by another request meanwhile' USING ERRCODE = 'RF409';
  END IF;

  -- 5. The money limits, last: a counter row stays locked from its update to the commit, so
  -- consuming last holds it no longer than the stepwise path's own consumption did (its update
  -- and its commit). Both or neither, by the same function and rules as the stepwise path. Over a
  -- limit, everything above is rolled back (RF429, the refusal's figures as JSON in DETAIL).
  IF (p_rate_limit IS NOT NULL AND p_rate_limit > 0) OR (p_amount_limit IS NOT NULL AND p_amount_limit >= 0) THEN
    v_lock_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', p_limits_lock_wait_ms || 'ms', true);
    v_limits_started := clock_timestamp();
    SELECT * INTO v_limits FROM consume_payout_limits(p_client, p_rate_limit, p_rate_window_ms, p_account, p_currency, p_amount, p_amount_limit);
    v_limits_ms := extract(epoch FROM clock_timestamp() - v_limits_started) * 1000;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    IF v_limits.outcome <> 'OK' THEN
      RAISE EXCEPTION 'over a money limit: %', v_limits.outcome USING ERRCODE = 'RF429',
        DETAIL = json_build_object('limit', v_limits.outcome, 'used', v_limits.used::text, 'limit_value', v_limits.limit_value::text,
                                   'resets_at', to_char(v_limits.resets_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                   'limits_ms', v_limits_ms)::text;
    END IF;
  END IF;

  RETURN QUERY SELECT 'CREATED'::text, v_response, v_expires, NULL::float8, v_takeover, v_limits_ms;
END $$;

-- Least privilege (008): the function runs as its caller (SECURITY INVOKER), whose grants it
-- needs and has (idempotency_keys, the payouts insert columns, payout_limit_usage,
-- consume_payout_limits); only the payouts API may call it.
REVOKE ALL ON FUNCTION payouts_pb_varint(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION payouts_pb_created_at(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION create_payout(text, text, bytea, bigint, text, text, bigint, text, text, text, text, bytea, bigint, bigint, numeric, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION payouts_pb_varint(bigint) TO railfence_payouts;
GRANT EXECUTE ON FUNCTION payouts_pb_created_at(timestamptz) TO railfence_payouts;
GRANT EXECUTE ON FUNCTION create_payout(text, text, bytea, bigint, text, text, bigint, text, text, text, text, bytea, bigint, bigint, numeric, bigint) TO railfence_payouts;
