-- Fail-closed money limits for CreatePayout (RESILIENCE.md "fail-closed money limits"):
-- a per-client request rate (fixed windows of p_rate_window_ms) and a per-account amount per
-- currency per UTC day. Usage lives in one shared table so every payouts replica enforces the
-- same budget; windows are computed from the database clock (never a replica's).
CREATE TABLE payout_limit_usage (
  scope         text NOT NULL CHECK (scope IN ('client_rate', 'account_daily_amount')),
  -- client id (client_rate) or '<account_id>/<currency>' (account_daily_amount)
  subject       text NOT NULL,
  window_start  timestamptz NOT NULL,
  -- requests (client_rate) or minor units (account_daily_amount); numeric: a day of 10^15
  -- payouts must not overflow
  used          numeric NOT NULL CHECK (used >= 0),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, subject, window_start)
);
CREATE INDEX payout_limit_usage_window_idx ON payout_limit_usage (window_start);

-- Consumes one request of the client's rate and p_amount of the account's daily amount, both or
-- neither, in one round trip. A limit <= 0 / NULL is off. Answers one row:
--   outcome 'OK' (consumed; rate_window / day_window say which windows to refund on failure), or
--   'CLIENT_RATE' / 'ACCOUNT_DAILY_AMOUNT' (nothing consumed) with the usage, the limit and
--   when the window ends.
CREATE FUNCTION consume_payout_limits(
  p_client text, p_rate_limit bigint, p_rate_window_ms bigint,
  p_account text, p_currency text, p_amount bigint, p_amount_limit numeric)
RETURNS TABLE (outcome text, used numeric, limit_value numeric, resets_at timestamptz, rate_window timestamptz, day_window timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_rate_start timestamptz := to_timestamp(floor(extract(epoch FROM now()) * 1000 / p_rate_window_ms) * p_rate_window_ms / 1000.0);
  v_day_start timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  v_subject text := p_account || '/' || p_currency;
  v_used numeric;
  v_rate_taken boolean := false;
BEGIN
  IF p_rate_limit IS NOT NULL AND p_rate_limit > 0 THEN
    INSERT INTO payout_limit_usage AS u (scope, subject, window_start, used)
    VALUES ('client_rate', p_client, v_rate_start, 1)
    ON CONFLICT (scope, subject, window_start) DO UPDATE SET used = u.used + 1, updated_at = now()
      WHERE u.used + 1 <= p_rate_limit
    RETURNING u.used INTO v_used;
    IF NOT FOUND THEN
      SELECT u.used INTO v_used FROM payout_limit_usage u WHERE u.scope = 'client_rate' AND u.subject = p_client AND u.window_start = v_rate_start;
      RETURN QUERY SELECT 'CLIENT_RATE'::text, v_used, p_rate_limit::numeric, v_rate_start + make_interval(secs => p_rate_window_ms / 1000.0), NULL::timestamptz, NULL::timestamptz;
      RETURN;
    END IF;
    v_rate_taken := true;
  END IF;

  IF p_amount_limit IS NOT NULL AND p_amount_limit >= 0 THEN
    IF p_amount > p_amount_limit THEN
      v_used := NULL; -- this payout alone is over the daily limit
    ELSE
      INSERT INTO payout_limit_usage AS u (scope, subject, window_start, used)
      VALUES ('account_daily_amount', v_subject, v_day_start, p_amount)
      ON CONFLICT (scope, subject, window_start) DO UPDATE SET used = u.used + p_amount, updated_at = now()
        WHERE u.used + p_amount <= p_amount_limit
      RETURNING u.used INTO v_used;
    END IF;
    IF v_used IS NULL THEN
      -- Both or neither: give the rate request back.
      IF v_rate_taken THEN
        UPDATE payout_limit_usage SET used = used - 1, updated_at = now()
         WHERE scope = 'client_rate' AND subject = p_client AND window_start = v_rate_start;
      END IF;
      SELECT u.used INTO v_used FROM payout_limit_usage u WHERE u.scope = 'account_daily_amount' AND u.subject = v_subject AND u.window_start = v_day_start;
      RETURN QUERY SELECT 'ACCOUNT_DAILY_AMOUNT'::text, coalesce(v_used, 0), p_amount_limit, v_day_start + interval '1 day', NULL::timestamptz, NULL::timestamptz;
      RETURN;
    END IF;
  END IF;

  RETURN QUERY SELECT 'OK'::text, NULL::numeric, NULL::numeric, NULL::timestamptz,
    CASE WHEN v_rate_taken THEN v_rate_start END,
    CASE WHEN p_amount_limit IS NOT NULL AND p_amount_limit >= 0 THEN v_day_start END;
END $$;

-- Gives back what consume_payout_limits took, for a payout that provably was not created.
CREATE FUNCTION refund_payout_limits(
  p_client text, p_rate_window timestamptz, p_account text, p_currency text, p_amount bigint, p_day_window timestamptz)
RETURNS void LANGUAGE sql AS $$
  UPDATE payout_limit_usage SET used = greatest(0, used - 1), updated_at = now()
   WHERE p_rate_window IS NOT NULL AND scope = 'client_rate' AND subject = p_client AND window_start = p_rate_window;
  UPDATE payout_limit_usage SET used = greatest(0, used - p_amount), updated_at = now()
   WHERE p_day_window IS NOT NULL AND scope = 'account_daily_amount' AND subject = p_account || '/' || p_currency AND window_start = p_day_window;
$$;

-- Least privilege (008_service_roles.sql): only the payouts API consumes, refunds and purges
-- limit usage. The DELETE is of expired windows only (usage records, not money records).
REVOKE ALL ON payout_limit_usage FROM PUBLIC;
REVOKE ALL ON FUNCTION consume_payout_limits(text, bigint, bigint, text, text, bigint, numeric) FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON payout_limit_usage TO railfence_payouts;
GRANT EXECUTE ON FUNCTION consume_payout_limits(text, bigint, bigint, text, text, bigint, numeric) TO railfence_payouts;
REVOKE ALL ON FUNCTION refund_payout_limits(text, timestamptz, text, text, bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION refund_payout_limits(text, timestamptz, text, text, bigint, timestamptz) TO railfence_payouts;
