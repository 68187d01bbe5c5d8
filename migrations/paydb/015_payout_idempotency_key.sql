-- A payout keeps the idempotency key that created it (issue: "a key never outlives the server's
-- memory of it"). idempotency_keys forgets a key after IDEMPOTENCY_RETENTION_MS (purge-job.ts);
-- a client that lost an answer and finds its key expired must still be able to ask "did my key
-- create a payout?". LookupPayout answers from this column, scoped by client_id (which every
-- payout already carries), so it works whether or not the key row was purged.
--
-- NULL only for payouts created before this migration whose key row was already purged.
ALTER TABLE payouts ADD COLUMN idempotency_key text
  CHECK (idempotency_key IS NULL OR (length(idempotency_key) BETWEEN 1 AND 255 AND idempotency_key ~ '^[!-~]+$'));

-- The keys still remembered: copied onto their payouts (an owner's write: 009's and 012's
-- guards let the owner through, and 013's history ignores a change of neither state nor fence).
UPDATE payouts p SET idempotency_key = k.idempotency_key
  FROM idempotency_keys k
 WHERE k.payout_id = p.payout_id AND k.client_id = p.client_id AND k.state = 'DONE';

-- Lookups are per client, newest first (a key reused after its retention names several payouts).
CREATE INDEX payouts_client_key_idx ON payouts (client_id, idempotency_key, created_at DESC) WHERE idempotency_key IS NOT NULL;
CREATE INDEX payouts_client_reference_idx ON payouts (client_id, client_reference, created_at DESC) WHERE client_reference <> '';

-- The payouts role writes the key when it inserts a payout (012's column grants, extended by
-- this one column), and nobody else writes it: no role has UPDATE on it.
GRANT INSERT (idempotency_key) ON payouts TO railfence_payouts;

-- 012's insert guard, plus: a payout the payouts role inserts names its key (every CreatePayout
-- has one), so no API-created payout can be unfindable by its key.
CREATE OR REPLACE FUNCTION payouts_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
    RETURN NEW;
  END IF;
  IF NEW.state <> 'PENDING' OR NEW.fence <> 0 OR NEW.claimed_by IS NOT NULL OR NEW.claimed_until IS NOT NULL
     OR NEW.rail_reference IS NOT NULL OR NEW.failure_reason IS NOT NULL OR NEW.submission_ref IS NOT NULL
     OR NEW.attention_reason IS NOT NULL THEN
    RAISE EXCEPTION 'a new payout is PENDING with fence 0, no claim and no outcome (%)', NEW.payout_id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.idempotency_key IS NULL THEN
    RAISE EXCEPTION 'a new payout names the idempotency key that created it (%)', NEW.payout_id
      USING ERRCODE = 'not_null_violation';
  END IF;
  NEW.created_at := now();
  NEW.updated_at := now();
  RETURN NEW;
END $$;

-- What a payout pays, and which key made it, never change (009's guard covers the first; the
-- owner may still repair either).
CREATE FUNCTION payouts_key_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
     AND NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
    RAISE EXCEPTION 'the idempotency key of payout % never changes', OLD.payout_id USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER payouts_key_unchanged BEFORE UPDATE OF idempotency_key ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_key_immutable();
