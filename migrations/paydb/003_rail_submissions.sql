-- The intent ledger: one row per payout ever admitted by rail-proxy (payout_id is the primary
-- key, so a second admission of the same payout is impossible). The row is committed, with
-- the mark, BEFORE the rail is called; the outcome is written after.
CREATE TABLE rail_submissions (
  payout_id          text PRIMARY KEY,
  account_id         text NOT NULL,
  fencing_token      bigint NOT NULL CHECK (fencing_token > 0),
  amount_minor       bigint NOT NULL CHECK (amount_minor > 0),
  currency           text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  beneficiary        text NOT NULL,
  state              text NOT NULL
                     CHECK (state IN ('FORWARDING', 'ACCEPTED', 'REJECTED', 'TIMEOUT', 'RESOLVED_PAID', 'RESOLVED_NOT_PAID')),
  rail_reference     text,
  rail_reason        text,
  replica_id         text NOT NULL,
  -- false only when the harness ran with fencing disabled (D7) and this token did not
  -- advance the mark: the drill checker reports every such row.
  mark_advanced      boolean NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  answered_at        timestamptz,
  -- Why the row became TIMEOUT: RAIL_DEADLINE (the proxy's deadline passed) or
  -- STALE_FORWARDING (the sweeper found a row whose replica died mid-call).
  ambiguity_cause    text,
  -- Resolution (UC-07): recorded, never deleted.
  previous_state     text,
  resolution_outcome text CHECK (resolution_outcome IN ('PAID', 'NOT_PAID')),
  resolution_actor   text,
  resolution_note    text,
  resolved_at        timestamptz,
  CHECK ((state IN ('RESOLVED_PAID', 'RESOLVED_NOT_PAID')) = (resolved_at IS NOT NULL))
);
CREATE INDEX rail_submissions_unresolved_idx ON rail_submissions (created_at, payout_id)
  WHERE state IN ('FORWARDING', 'TIMEOUT');
CREATE INDEX rail_submissions_account_idx ON rail_submissions (account_id, fencing_token);
