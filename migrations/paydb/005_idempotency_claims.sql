-- Claim ids for Idempotency-Key markers, and the indexes the client-scoped payout reads need.
--
-- An IN_PROGRESS marker has a lease (locked_until). When a request outlives its lease (a crash,
-- a long pause) the next request with the same key takes the marker over. The slow first
-- request must then NOT complete: its final transaction (payout insert + key DONE) only
-- commits while the marker still carries its claim_id, so two attempts can never both create
-- a payout for one key.
ALTER TABLE idempotency_keys ADD COLUMN claim_id text;

-- Reads are scoped to the calling client and paged newest first on (created_at, payout_id).
CREATE INDEX payouts_client_created_idx ON payouts (client_id, created_at DESC, payout_id DESC);
CREATE INDEX payouts_client_account_created_idx ON payouts (client_id, account_id, created_at DESC, payout_id DESC);
