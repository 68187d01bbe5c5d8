/** The refusals CreatePayout's paths share (create-payout.ts), so each answers a situation alike. */
import { DomainError, REASONS, unavailable } from "../shared/domain/errors.js";
import { dbUnavailable } from "../shared/db/pg.js";

/** IDEMPOTENCY_KEY_REUSED, with the instant the key is free again (the handler puts it in a header). */
export class KeyReusedError extends DomainError {
  constructor(readonly keyExpiresAt: Date) {
    // The IETF draft says 422; Connect has no 422, so: invalid_argument (400) + reason.
    super(REASONS.IDEMPOTENCY_KEY_REUSED, "this idempotency-key was already used with a different request body; use a new key for a new payout", {
      field: "idempotency-key",
      http_status_in_ietf_draft: "422",
    });
  }
}

export const storeUnavailable = (err: unknown) =>
  unavailable(REASONS.IDEMPOTENCY_UNAVAILABLE, "the idempotency store is unavailable; nothing was executed. Retry with the same key", 1000, err);

/** paydb up but too slow (statement timeout, lock wait): the statement rolled back, nothing was executed. */
export const paydbBusy = (err: unknown): never => dbUnavailable("PAYDB", err, "nothing was executed. Retry with the same key");

export const conflict = (retryAfterMs: number) =>
  new DomainError(
    REASONS.IDEMPOTENCY_CONFLICT,
    "a request with this idempotency-key is still in progress; retry with the same key shortly",
    { field: "idempotency-key" },
    retryAfterMs,
  );
