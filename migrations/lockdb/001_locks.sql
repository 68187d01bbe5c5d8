-- Leases for the pg lock backend. A row per key lives for ever: `token` is the per-key
-- counter and only grows (a released lease keeps its row with lease_id NULL).
CREATE TABLE locks (
  key        text PRIMARY KEY,
  lease_id   text,
  owner      text,
  token      bigint NOT NULL CHECK (token > 0),
  granted_at timestamptz,
  expires_at timestamptz
);
