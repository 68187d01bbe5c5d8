-- Payouts: what clients asked to pay. `fence` is the resource fence of C1 §1.6: every executor
-- write is `UPDATE payouts ... WHERE payout_id = $1 AND fence < $token` (0 rows = fenced out).
CREATE TABLE payouts (
  payout_id        text PRIMARY KEY,
  client_id        text NOT NULL,
  account_id       text NOT NULL,
  amount_minor     bigint NOT NULL CHECK (amount_minor > 0),
  currency         text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  beneficiary      text NOT NULL,
  client_reference text NOT NULL DEFAULT '',
  state            text NOT NULL DEFAULT 'PENDING'
                   CHECK (state IN ('PENDING', 'PROCESSING', 'PAID', 'FAILED', 'UNKNOWN')),
  fence            bigint NOT NULL DEFAULT 0 CHECK (fence >= 0),
  rail_reference   text,
  failure_reason   text,
  -- Which executor claimed it, until when (a claim is a hint; the fence is the guard).
  claimed_by       text,
  claimed_until    timestamptz,
  -- W3C traceparent of the creating request, so the executor's work joins the payout's trace.
  traceparent      text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payouts_pending_idx ON payouts (created_at) WHERE state IN ('PENDING', 'PROCESSING');
CREATE INDEX payouts_account_idx ON payouts (account_id, created_at DESC);
CREATE INDEX payouts_created_idx ON payouts (created_at DESC, payout_id DESC);
