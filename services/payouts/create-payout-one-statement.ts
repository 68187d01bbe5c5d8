/**
 * CreatePayout in one statement (decision 071): paydb's create_payout() settles the key,
 * consumes the money limits, inserts the PENDING payout and pins the answer to the key, in one
 * round trip and one transaction — all of it, or nothing:
 *
 * - replay / reused key / a request with the key in progress: answered from what the statement
 *   reads, nothing written; a replay is never refused by, nor counted against, a limit;
 * - over a limit: RESOURCE_EXHAUSTED (or PAYOUT_ABOVE_DAILY_LIMIT), no key, no payout, no usage;
 * - a counter held past LIMITS_LOCK_WAIT_MS: LIMITS_CONTENDED, the statement rolled back;
 * - paydb unreachable: IDEMPOTENCY_UNAVAILABLE; too slow: PAYDB_BUSY. Limits and key live in the
 *   same database here, so there is no separate "limits unavailable": either way nothing ran;
 * - any other failure rolls everything back: errors are not pinned, and there is no marker to
 *   delete and no consumption to give back.
 *
 * The caller's abort signal is deliberately not used: a client that hangs up must not leave a
 * half-finished attempt; the statement commits or rolls back, and a retry replays it.
 */
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { isBusyError, isLockTimeout, isUnavailableError } from "../shared/db/pg.js";
import { CreatePayoutResponseSchema } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
import { conflict, KeyReusedError, paydbBusy, storeUnavailable } from "./create-payout-answers.js";
import { KEY_TAKEN_MEANWHILE, type CreatePayoutStatement } from "./create-payout-statement.js";
import type { CreatePayoutCommand, CreatePayoutDeps, CreatePayoutResult } from "./create-payout.js";
import { requestFingerprint } from "./idempotency.js";
import { dailyAmountLimit, limitExceeded, limitsContended } from "./limits.js";
import { newPayoutId, toPayout } from "./payout-message.js";

export function createOneStatementCreator(deps: CreatePayoutDeps, statement: CreatePayoutStatement) {
  const { metrics, logger } = deps;
  const limitsOn = (currency: string) => deps.limits.clientRequests > 0 || dailyAmountLimit(deps.limits, currency) !== null;

  return async function createPayout(cmd: CreatePayoutCommand): Promise<CreatePayoutResult> {
    const started = performance.now();
    const done = (outcome: string) => metrics.createSeconds.observe({ outcome }, (performance.now() - started) / 1000);
    const payoutId = newPayoutId();

    let outcome;
    try {
      outcome = await statement.run({
        clientId: cmd.clientId,
        key: cmd.key,
        fingerprint: requestFingerprint(cmd.request),
        retentionMs: deps.retentionMs,
        payoutId,
        accountId: cmd.accountId,
        amountMinor: cmd.amountMinor,
        currency: cmd.currency,
        beneficiary: cmd.beneficiary,
        clientReference: cmd.clientReference,
        traceparent: cmd.traceparent,
        responseHead: responseHead(cmd, payoutId),
        rateLimit: deps.limits.clientRequests,
        rateWindowMs: deps.limits.clientWindowMs,
        amountLimit: dailyAmountLimit(deps.limits, cmd.currency),
        limitsLockWaitMs: deps.limitsLockWaitMs,
      });
    } catch (err) {
      // Only the counters are waited on with a lock timeout: this is load on one client and
      // account, not an outage. The statement rolled back; nobody is paged for it.
      if (isLockTimeout(err)) {
        metrics.limitContention.inc();
        done("limits_contended");
        throw limitsContended(err);
      }
      if ((err as { code?: unknown })?.code === KEY_TAKEN_MEANWHILE) {
        metrics.conflicts.inc();
        done("conflict");
        throw conflict(1000);
      }
      if (isBusyError(err)) {
        done("busy");
        paydbBusy(err);
      }
      if (isUnavailableError(err)) {
        metrics.unavailable.inc();
        done("unavailable");
        throw storeUnavailable(err);
      }
      done("error");
      throw err;
    }

    switch (outcome.kind) {
      case "replay":
        metrics.replays.inc();
        done("replayed");
        return { response: fromBinary(CreatePayoutResponseSchema, outcome.response), replayed: true, keyExpiresAt: outcome.expiresAt };
      case "conflict":
        metrics.conflicts.inc();
        done("conflict");
        throw conflict(outcome.retryAfterMs);
      case "reused":
        metrics.keyReused.inc();
        done("key_reused");
        throw new KeyReusedError(outcome.expiresAt);
      case "exceeded":
        if (limitsOn(cmd.currency)) metrics.limitCheckSeconds.observe(outcome.limitsMs / 1000);
        metrics.limitRefusals.inc({ limit: outcome.limit === "CLIENT_RATE" ? "client_rate" : "account_daily_amount" });
        done("limit_exceeded");
        throw limitExceeded(outcome, cmd);
      case "created":
        break;
    }
    if (limitsOn(cmd.currency)) metrics.limitCheckSeconds.observe(outcome.limitsMs / 1000);
    if (outcome.takeover) {
      metrics.takeovers.inc();
      logger.warn({ event: "idempotency_takeover", client_id: cmd.clientId }, "took over an expired idempotency marker");
    }
    metrics.created.inc();
    done("created");
    // Answer with the very bytes stored, so the first answer and every replay are identical.
    return { response: fromBinary(CreatePayoutResponseSchema, outcome.response), replayed: false, keyExpiresAt: outcome.expiresAt };
  };
}

/**
 * The answer as this service knows it before paydb runs: the new payout through the same mapping
 * every read uses (toPayout), without the two timestamps only paydb knows; create_payout()
 * appends those (protobuf merges the two encodings of `payout`).
 */
export function responseHead(
  cmd: Pick<CreatePayoutCommand, "accountId" | "amountMinor" | "currency" | "beneficiary" | "clientReference">,
  payoutId: string,
): Uint8Array {
  const payout = toPayout({
    payout_id: payoutId,
    client_id: "",
    account_id: cmd.accountId,
    amount_minor: cmd.amountMinor.toString(),
    currency: cmd.currency,
    beneficiary: cmd.beneficiary,
    client_reference: cmd.clientReference,
    state: "PENDING",
    fence: "0",
    rail_reference: null,
    failure_reason: null,
    attention_reason: null,
    attention_detail: null,
    attention_at: null,
    created_at: new Date(0),
    updated_at: new Date(0),
    cursor: "",
  });
  payout.createdAt = undefined;
  payout.updatedAt = undefined;
  return toBinary(CreatePayoutResponseSchema, create(CreatePayoutResponseSchema, { payout }));
}
