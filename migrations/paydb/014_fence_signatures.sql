-- Fences only the lock service issued (issue: executors can park payouts). 009 keeps a payout's
-- fence rising, but lets the executor's role raise it to any value: a compromised executor sets
-- 9223372036854775807 and every honest executor is fenced out of that payout for ever. When the
-- lock service signs its tokens (HMAC-SHA256 over the lock key and the token, the same message
-- rail-proxy verifies: services/shared/process/token-signature.ts), paydb verifies the signature of
-- every new fence itself, so no service role can write a fence the lock did not issue.
--
-- The key is installed by the owner (`migrate paydb` with TOKEN_SIGNING_KEY_FILE; the harness
-- when it signs tokens) into a table no service role can read. No key: fences are not verified
-- (token signing is off; the executor's FENCE_AHEAD_OF_LOCK check and the audit's open-age bound
-- are what remain).

-- hmac(). pgcrypto is a trusted extension (PostgreSQL 13+): the database owner may create it.
CREATE EXTENSION IF NOT EXISTS pgcrypto;

CREATE TABLE fence_signing_key (
  only_one     boolean PRIMARY KEY DEFAULT true CHECK (only_one),
  key          bytea NOT NULL CHECK (octet_length(key) >= 32),
  installed_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON fence_signing_key FROM PUBLIC;

-- The signature the lock service gave with the token the fence carries (executors write both).
ALTER TABLE payouts ADD COLUMN fence_signature bytea;
GRANT UPDATE (fence_signature) ON payouts TO railfence_executor;

-- Runs as the owner (the only role that can read the key).
CREATE FUNCTION payouts_fence_signed() RETURNS trigger LANGUAGE plpgsql
  SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  signing_key bytea;
BEGIN
  IF NEW.fence IS NOT DISTINCT FROM OLD.fence THEN RETURN NEW; END IF;
  SELECT key INTO signing_key FROM fence_signing_key;
  IF NOT FOUND THEN RETURN NEW; END IF;
  IF NEW.fence_signature IS NULL OR NEW.fence_signature <> hmac(
       convert_to('railfence.fencing-token.v1' || E'\n' || 'account:' || NEW.account_id || E'\n' || NEW.fence::text, 'UTF8'),
       signing_key, 'sha256') THEN
    RAISE EXCEPTION 'payout % fence % is not a token the lock service signed for account %', NEW.payout_id, NEW.fence, NEW.account_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER payouts_fence_signed
  BEFORE UPDATE OF fence ON payouts
  FOR EACH ROW EXECUTE FUNCTION payouts_fence_signed();
