-- Harness only: the admission statement with its guards as switches, for the negative controls
-- (decision 064). Installed by tools/harness/unguarded-admission.ts into a harness's throwaway
-- paydb, only when a rail-proxy is started with a statement guard removed; never a migration,
-- never in the image. Each switch removes one guard alone, and the row records honestly which
-- guards applied (mark_advanced, payout_bound, one_live_exempt), so the checkers can be shown to
-- catch what then gets through.
--
-- What it undoes in this database, and only here:
-- - the ledger's CHECK that every guard applied (migration 019);
-- - the one-live index applies to every row: here a row may be written exempt from it.

ALTER TABLE rail_submissions DROP CONSTRAINT rail_submissions_admitted_by_the_fence;
ALTER TABLE rail_submissions ADD COLUMN one_live_exempt boolean NOT NULL DEFAULT false;
DROP INDEX rail_submissions_one_live_per_payout;
CREATE UNIQUE INDEX rail_submissions_one_live_per_payout ON rail_submissions (bound_payout_id)
  WHERE NOT one_live_exempt AND state NOT IN ('REJECTED', 'NOT_FORWARDED') AND reopened_at IS NULL;

CREATE FUNCTION harness_rail_admit(
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
      refusal := 'PAYOUT_FENCE_MISMATCH'; refusal_detail := CASE WHEN po.fence > p_token THEN 'NEWER' ELSE 'OLDER' END;
    END IF;
    IF refusal IS NOT NULL THEN
      IF p_mark_guard AND EXISTS (SELECT 1 FROM rail_high_water h WHERE h.account_id = p_account_id AND h.mark >= p_token) THEN
        RETURN QUERY SELECT 'FENCED_OUT'::text, NULL::text;
      ELSE
        RETURN QUERY SELECT refusal, refusal_detail;
      END IF;
      RETURN;
    END IF;
  END IF;

  -- [rule:admit-unfenced]
  INSERT INTO rail_high_water AS h (account_id, mark) VALUES (p_account_id, p_token)
    ON CONFLICT (account_id) DO UPDATE SET mark = EXCLUDED.mark, updated_at = now()
    WHERE h.mark < EXCLUDED.mark;
  advanced := FOUND;
  IF p_mark_guard AND NOT advanced THEN
    RETURN QUERY SELECT 'FENCED_OUT'::text, NULL::text;
    RETURN;
  END IF;
  -- [/rule:admit-unfenced]

  INSERT INTO rail_submissions
    (payout_id, bound_payout_id, account_id, fencing_token, amount_minor, currency, beneficiary, state, replica_id,
     mark_advanced, payout_bound, one_live_exempt)
  VALUES (p_reference, p_payout_id, p_account_id, p_token, p_amount_minor, p_currency, p_beneficiary, 'FORWARDING', p_replica_id,
     advanced, p_binding_guard, NOT p_one_live_guard);
  RETURN QUERY SELECT 'ADMITTED'::text, NULL::text;
END $$;

-- The group form (migration 023's rail_admit_batch, with the same switches): the controls run
-- with group admission as production does, so each removes its guard alone.
CREATE FUNCTION harness_rail_admit_batch(
    p_references text[], p_payout_ids text[], p_account_ids text[], p_tokens bigint[],
    p_amounts_minor bigint[], p_currencies text[], p_beneficiaries text[], p_replica_id text,
    p_mark_guard boolean, p_binding_guard boolean, p_one_live_guard boolean)
  RETURNS TABLE (ord int, outcome text, detail text)
  LANGUAGE plpgsql AS $$
DECLARE
  o text;
  d text;
  violated text;
BEGIN
  FOR i IN 1..coalesce(array_length(p_references, 1), 0) LOOP
    BEGIN
      SELECT a.outcome, a.detail INTO o, d
        FROM harness_rail_admit(p_references[i], p_payout_ids[i], p_account_ids[i], p_tokens[i], p_amounts_minor[i],
                                p_currencies[i], p_beneficiaries[i], p_replica_id, p_mark_guard, p_binding_guard, p_one_live_guard) a;
    EXCEPTION WHEN unique_violation THEN
      GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
      IF violated = 'rail_submissions_pkey' THEN
        o := 'DUPLICATE'; d := NULL;
      ELSIF violated = 'rail_submissions_one_live_per_payout' THEN
        o := 'PAYOUT_ALREADY_SUBMITTED';
        SELECT s.payout_id INTO d FROM rail_submissions s
         WHERE s.bound_payout_id = p_payout_ids[i] AND s.state NOT IN ('REJECTED', 'NOT_FORWARDED') AND s.reopened_at IS NULL
         ORDER BY s.created_at LIMIT 1;
      ELSE
        RAISE;
      END IF;
    END;
    ord := i; outcome := o; detail := d;
    RETURN NEXT;
  END LOOP;
END $$;
