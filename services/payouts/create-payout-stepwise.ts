/**
 * CreatePayout in steps, for a money-limit store of its own (LIMITS_DB_URL: a transaction cannot
 * span two databases). Order of work:
 *   1. settle the key (claim it, or answer replay / conflict / reused) — paydb down: refuse,
 *      IDEMPOTENCY_UNAVAILABLE, nothing executed. A replay is answered here: it is never
 *      refused by, nor counted against, a money limit;
 *   2. consume the money limits (limits.ts) in the shared store — over a limit:
 *      RESOURCE_EXHAUSTED; store unreachable: LIMITS_UNAVAILABLE (fail closed);
 *   3. ONE transaction: insert the PENDING payout and pin the answer to the key (DONE). The
 *      pin only succeeds while we still hold the claim, so a request whose lease was taken
 *      over rolls its payout back: one key, one payout, always;
 *   4. on any failure after the claim, delete our marker: errors are not pinned. The limits
 *      are given back only when the payout provably was not created.
 *
 * The caller's abort signal is deliberately not used: a client that hangs up must not leave a
 * half-finished attempt; the attempt finishes (or rolls back) and a retry replays it.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { isBusyError, isLockTimeout, isUnavailableError } from "../shared/db/pg.js";
import { CreatePayoutResponseSchema } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
import { conflict, KeyReusedError, paydbBusy, storeUnavailable } from "./create-payout-answers.js";
import type { CreatePayoutCommand, CreatePayoutDeps, CreatePayoutResult } from "./create-payout.js";
import { claimKey, requestFingerprint } from "./idempotency.js";
import { newPayoutId, toPayout } from "./payout-message.js";
import { ROLLBACK } from "./payout-store.js";
import { dailyAmountLimit, limitExceeded, limitsContended, limitsUnavailable, type Consumption } from "./limits.js";

export function createStepwiseCreator(deps: CreatePayoutDeps) {
  const { payouts, keys, metrics, logger, limitStore } = deps;

  /**
   * Consumes the money limits of a claimed request, or frees the key and refuses. Bounded by
   * limitsTimeoutMs: a store that does not answer in time is unavailable (a late consumption
   * then stays counted: fail closed).
   */
  async function consumeLimits(cmd: CreatePayoutCommand, claimId: string, done: (outcome: string) => void): Promise<Consumption> {
    const amountLimit = dailyAmountLimit(deps.limits, cmd.currency);
    if (deps.limits.clientRequests === 0 && amountLimit === null) return { rateWindow: null, dayWindow: null };
    const started = performance.now();
    let decision;
    try {
      decision = await withTimeout(
        limitStore.consume({
          clientId: cmd.clientId,
          rateLimit: deps.limits.clientRequests,
          rateWindowMs: deps.limits.clientWindowMs,
          accountId: cmd.accountId,
          currency: cmd.currency,
          amountMinor: cmd.amountMinor,
          amountLimit,
        }),
        deps.limitsTimeoutMs,
      );
    } catch (err) {
      await keys.release(cmd.clientId, cmd.key, claimId).catch(() => false);
      // A counter another request held past the wait: load on one client and account, not an
      // outage. Nothing was consumed (the statement rolled back); nobody is paged for it.
      if (isLockTimeout(err)) {
        metrics.limitContention.inc();
        done("limits_contended");
        throw limitsContended(err);
      }
      // A bug (bad SQL, a missing migration) is an internal error, not an outage to wait out.
      // A store too slow to answer within its statement timeout (57014) is unavailable, as its silence is.
      if (!(err instanceof LimitTimeout) && !isUnavailableError(err) && !isBusyError(err)) {
        done("error");
        throw err;
      }
      metrics.limitStoreUnavailable.inc();
      done("limits_unavailable");
      // Logged once, at the boundary (reason LIMITS_UNAVAILABLE); counted and alerted on.
      throw limitsUnavailable(err);
    } finally {
      metrics.limitCheckSeconds.observe((performance.now() - started) / 1000);
    }
    if (decision.kind === "exceeded") {
      await keys.release(cmd.clientId, cmd.key, claimId).catch(() => false);
      metrics.limitRefusals.inc({ limit: decision.limit === "CLIENT_RATE" ? "client_rate" : "account_daily_amount" });
      done("limit_exceeded");
      throw limitExceeded(decision, cmd);
    }
    return decision.consumption;
  }

  /** Gives limits back; a failure only leaves them counted (fail closed), so it is logged, not thrown. */
  async function refund(cmd: CreatePayoutCommand, c: Consumption): Promise<void> {
    if (!c.rateWindow && !c.dayWindow) return;
    await limitStore.refund(cmd, c).catch((err: unknown) => {
      logger.warn(
        { event: "limit_refund_failed", error: err instanceof Error ? err.message.slice(0, 200) : "error" },
        "could not give money limits back; they stay counted",
      );
    });
  }

  return async function createPayout(cmd: CreatePayoutCommand): Promise<CreatePayoutResult> {
    const started = performance.now();
    const done = (outcome: string) => metrics.createSeconds.observe({ outcome }, (performance.now() - started) / 1000);
    const fingerprint = requestFingerprint(cmd.request);

    let claim;
    try {
      claim = await claimKey(keys, { clientId: cmd.clientId, key: cmd.key, fingerprint, lockMs: deps.lockMs, retentionMs: deps.retentionMs });
    } catch (err) {
      if (isBusyError(err)) {
        done("busy");
        paydbBusy(err);
      }
      if (!isUnavailableError(err)) throw err;
      metrics.unavailable.inc();
      done("unavailable");
      throw storeUnavailable(err);
    }

    switch (claim.kind) {
      case "replay":
        metrics.replays.inc();
        done("replayed");
        return { response: fromBinary(CreatePayoutResponseSchema, claim.response), replayed: true, keyExpiresAt: claim.expiresAt };
      case "conflict":
        metrics.conflicts.inc();
        done("conflict");
        throw conflict(claim.retryAfterMs);
      case "reused":
        metrics.keyReused.inc();
        done("key_reused");
        throw new KeyReusedError(claim.expiresAt);
      case "claimed":
        break;
    }
    if (claim.takeover) {
      metrics.takeovers.inc();
      logger.warn({ event: "idempotency_takeover", client_id: cmd.clientId }, "took over an expired idempotency marker");
    }

    const claimId = claim.claimId;
    const consumption = await consumeLimits(cmd, claimId, done);
    let outcome;
    try {
      outcome = await payouts.withTransaction(async (tx) => {
        const row = await payouts.insert(tx, {
          payoutId: newPayoutId(),
          clientId: cmd.clientId,
          accountId: cmd.accountId,
          amountMinor: cmd.amountMinor,
          currency: cmd.currency,
          beneficiary: cmd.beneficiary,
          clientReference: cmd.clientReference,
          traceparent: cmd.traceparent,
          idempotencyKey: cmd.key,
        });
        const response = create(CreatePayoutResponseSchema, { payout: toPayout(row) });
        const bytes = toBinary(CreatePayoutResponseSchema, response);
        const expiresAt = await keys.markDone(tx, {
          clientId: cmd.clientId,
          key: cmd.key,
          claimId,
          response: bytes,
          payoutId: row.payout_id,
          retentionMs: deps.retentionMs,
        });
        return expiresAt ? { bytes, expiresAt } : ROLLBACK;
      });
    } catch (err) {
      // Not pinned: free the key so a retry runs again. If paydb is gone this fails too and
      // the marker's lease frees the key by itself.
      const released = await keys.release(cmd.clientId, cmd.key, claimId).catch(() => false);
      // Our marker was still IN_PROGRESS: the payout was not committed, give the limits back.
      if (released) await refund(cmd, consumption);
      if (isUnavailableError(err)) {
        metrics.unavailable.inc();
        done("unavailable");
        throw storeUnavailable(err);
      }
      if (isBusyError(err)) {
        done("busy");
        paydbBusy(err);
      }
      done("error");
      throw err;
    }
    if (outcome === ROLLBACK) {
      // Our lease expired and another request took the key over: it owns the payout now (and
      // consumed its own limits), ours was rolled back.
      await refund(cmd, consumption);
      metrics.conflicts.inc();
      done("conflict");
      throw conflict(1000);
    }
    metrics.created.inc();
    done("created");
    // Answer with the very bytes we stored, so the first answer and every replay are identical.
    return { response: fromBinary(CreatePayoutResponseSchema, outcome.bytes), replayed: false, keyExpiresAt: outcome.expiresAt };
  };
}

class LimitTimeout extends Error {}

/** Rejects after ms (the work itself is not cancelled: its late result is ignored). */
function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LimitTimeout(`no answer within ${ms} ms`)), ms);
  });
  work.catch(() => {});
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}
