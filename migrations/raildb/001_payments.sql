-- The rail stub's own ledger: the third party's books. Every accepted SubmitPayment is a new
-- row, even with a client_reference seen before (the rail is not idempotent). The drill
-- checker reads this ledger (through ListPayments) to prove INV-02.
CREATE TABLE payments (
  sequence         bigserial PRIMARY KEY,
  rail_reference   text NOT NULL UNIQUE,
  client_reference text NOT NULL,
  account_id       text NOT NULL,
  beneficiary      text NOT NULL,
  amount_minor     bigint NOT NULL,
  currency         text NOT NULL,
  status           text NOT NULL CHECK (status IN ('ACCEPTED', 'REJECTED')),
  reason           text NOT NULL DEFAULT '',
  booked_at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX payments_booked_idx ON payments (booked_at);
CREATE INDEX payments_client_reference_idx ON payments (client_reference);
