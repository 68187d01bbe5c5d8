-- The daily amount limit becomes a budget per client AND account (issue: "limits leak across
-- clients"). Under 010 every client shared one budget per account: any client could spend any
-- account's day, and the refusal's `used` told a client how much the others had spent on an
-- account whose payouts it cannot read. Now the subject of scope 'account_daily_amount' is
-- '<client_id>/<account_id>/<currency>' (neither a client id nor an account id contains '/').
-- What an account can send in a day is then at most (configured clients x the limit).
--
-- Same signatures as 010, so the grants to railfence_payouts stay as they are.
CREATE OR REPLACE FUNCTION consume_payout_limits(
  p_client text, p_rate_limit bigint, p_rate_window_ms bigint,
  p_account text, p_currency text, p_amount bigint, p_amount_limit numeric)
RETURNS TABLE (outcome text, used numeric, limit_value numeric, resets_at timestamptz, rate_window timestamptz, day_window timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_rate_start timestamptz := to_timestamp(floor(extract(epoch FROM now()) * 1000 / p_rate_window_ms) * p_rate_window_ms / 1000.0);
  v_day_start timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  v_subject text := p_client || '/' || p_account || '/' || p_currency;
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
      -- The caller's own usage: the only spending a refusal may speak of.
      SELECT u.used INTO v_used FROM payout_limit_usage u WHERE u.scope = 'account_daily_amount' AND u.subject = v_subject AND u.window_start = v_day_start;
      RETURN QUERY SELECT 'ACCOUNT_DAILY_AMOUNT'::text, coalesce(v_used, 0), p_amount_limit, v_day_start + interval '1 day', NULL::timestamptz, NULL::timestamptz;
      RETURN;
    END IF;
  END IF;

  RETURN QUERY SELECT 'OK'::text, NULL::numeric, NULL::numeric, NULL::timestamptz,
    CASE WHEN v_rate_taken THEN v_rate_start END,
    CASE WHEN p_amount_limit IS NOT NULL AND p_amount_limit >= 0 THEN v_day_start END;
END $$;

CREATE OR REPLACE FUNCTION refund_payout_limits(
  p_client text, p_rate_window timestamptz, p_account text, p_currency text, p_amount bigint, p_day_window timestamptz)
RETURNS void LANGUAGE sql AS $$
  UPDATE payout_limit_usage SET used = greatest(0, used - 1), updated_at = now()
   WHERE p_rate_window IS NOT NULL AND scope = 'client_rate' AND subject = p_client AND window_start = p_rate_window;
  UPDATE payout_limit_usage SET used = greatest(0, used - p_amount), updated_at = now()
   WHERE p_day_window IS NOT NULL AND scope = 'account_daily_amount' AND subject = p_client || '/' || p_account || '/' || p_currency
     AND window_start = p_day_window;
$$;

-- Today's spending carries over, per client, from the payouts that exist (a payout exists only
-- with its consumption, 010): an upgrade mid-day must not hand every client a fresh budget.
-- The shared counters of 010 ('<account>/<currency>') are then dropped: nothing reads them.
INSERT INTO payout_limit_usage (scope, subject, window_start, used)
SELECT 'account_daily_amount', client_id || '/' || account_id || '/' || currency,
       date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', sum(amount_minor)
  FROM payouts
 WHERE created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
 GROUP BY client_id, account_id, currency
ON CONFLICT (scope, subject, window_start) DO UPDATE SET used = EXCLUDED.used, updated_at = now();
DELETE FROM payout_limit_usage WHERE scope = 'account_daily_amount' AND subject !~ '^[^/]+/[^/]+/[^/]+$';
