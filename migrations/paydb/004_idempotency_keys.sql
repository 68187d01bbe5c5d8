-- Idempotency-Key store for CreatePayout (RESILIENCE.md contract), scoped per client identity.
-- A key is IN_PROGRESS while its first request runs (with a lease that expires by itself, so
-- a crash never leaves it stuck), then DONE with the stored answer. Errors are not pinned:
-- a failed first request deletes its IN_PROGRESS row.
CREATE TABLE idempotency_keys (
  client_id        text NOT NULL,
  idempotency_key  text NOT NULL,
  fingerprint      bytea NOT NULL,
  state            text NOT NULL CHECK (state IN ('IN_PROGRESS', 'DONE')),
  -- The stored answer (binary protobuf of the response message) and what it refers to.
  response         bytea,
  payout_id        text,
  locked_until     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  PRIMARY KEY (client_id, idempotency_key),
  CHECK ((state = 'DONE') = (response IS NOT NULL))
);
CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);
