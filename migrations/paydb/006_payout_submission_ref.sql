-- The reference of the payout's current attempt at rail-proxy (SubmitPayout.payout_id), written
-- with the fence. It equals payout_id unless an executor presents a fresh reference per attempt
-- (see services/shared/domain/submission-ref.ts); the reconciler uses it to apply a resolution only to
-- the attempt the payout is waiting on.
ALTER TABLE payouts ADD COLUMN submission_ref text;
