-- A payable payout's announcement names its account (decision 075).
--
-- 021 sent an empty payload so that a transaction creating many payouts would wake each executor
-- once. An executor told only "something is payable" must claim before it can lock: a commit
-- that says nothing the fence could not say itself. Told the account, the executor that answers
-- takes the account's lock first and then claims and fences the account's oldest payable payout
-- in ONE statement (the executor's FENCE_NEXT): same fence rule per row, one commit fewer.
--
-- PostgreSQL still folds identical notifications of one transaction, so payouts of one account
-- created together announce it once; payouts of many accounts created together announce each
-- account, and an executor with no free slot for one treats it as before (claim when a slot
-- frees). A payload is a hint, like the notification itself: the account ids the API admits are
-- at most 64 characters; anything longer than 200 bytes (no such id exists) is sent empty, which
-- means "claim", as before, rather than failing the insert on pg_notify's payload limit.
CREATE OR REPLACE FUNCTION payouts_announce_payable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('railfence_payout_payable', CASE WHEN octet_length(NEW.account_id) <= 200 THEN NEW.account_id ELSE '' END);
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION payouts_announce_payable() FROM PUBLIC;

-- The oldest payable payout of one account, found without reading the account's history.
CREATE INDEX payouts_payable_account_idx ON payouts (account_id, created_at) WHERE state IN ('PENDING', 'PROCESSING');
