-- Group admission (decision 068): the submissions a rail-proxy replica receives while its previous
-- admission statement is in paydb are admitted together, in ONE statement and ONE commit.
--
-- Each item is exactly rail_admit() (migration 019), run in its own subtransaction in the order
-- given: the mark each item compares against is the one the items before it left (never a
-- snapshot taken for the whole batch), and a duplicate reference or a second live submission of
-- a payout rolls back that item alone, mark advance included, and answers it alone. Everything
-- admitted in the batch commits together; nothing is forwarded before that commit.
--
-- The caller orders the items by account (stable: arrival order within an account), so two
-- batches running at once lock the accounts' mark rows in the same order and cannot deadlock on
-- them.
--
-- Returns one row per item: its 1-based position, the outcome (rail_admit's, or DUPLICATE, or
-- PAYOUT_ALREADY_SUBMITTED), and a detail (for PAYOUT_ALREADY_SUBMITTED: the live submission's
-- reference, read after the item rolled back).
-- [rule:group-admit-sql]
CREATE FUNCTION rail_admit_batch(
    p_references text[], p_payout_ids text[], p_account_ids text[], p_tokens bigint[],
    p_amounts_minor bigint[], p_currencies text[], p_beneficiaries text[], p_replica_id text)
  RETURNS TABLE (ord int, outcome text, detail text)
  LANGUAGE plpgsql AS $$
DECLARE
  n int := coalesce(array_length(p_references, 1), 0);
  o text;
  d text;
  violated text;
BEGIN
  IF n = 0 OR array_length(p_payout_ids, 1) IS DISTINCT FROM n OR array_length(p_account_ids, 1) IS DISTINCT FROM n
     OR array_length(p_tokens, 1) IS DISTINCT FROM n OR array_length(p_amounts_minor, 1) IS DISTINCT FROM n
     OR array_length(p_currencies, 1) IS DISTINCT FROM n OR array_length(p_beneficiaries, 1) IS DISTINCT FROM n THEN
    RAISE EXCEPTION 'rail_admit_batch: % references and arrays of other lengths', n USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR i IN 1..n LOOP
    BEGIN
      SELECT a.outcome, a.detail INTO o, d
        FROM rail_admit(p_references[i], p_payout_ids[i], p_account_ids[i], p_tokens[i],
                        p_amounts_minor[i], p_currencies[i], p_beneficiaries[i], p_replica_id) a;
    EXCEPTION WHEN unique_violation THEN
      -- This item's writes (its mark advance included) are rolled back; the others stand.
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
-- [/rule:group-admit-sql]

REVOKE ALL ON FUNCTION rail_admit_batch(text[], text[], text[], bigint[], bigint[], text[], text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rail_admit_batch(text[], text[], text[], bigint[], bigint[], text[], text[], text) TO railfence_rail_proxy;
