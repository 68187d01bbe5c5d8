/**
 * PayoutService handlers: validate, call the domain, map rows to messages. The only layer of
 * this service that knows Connect codes and headers. Every input is checked before anything
 * is written, and every failure names its field.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { DomainError, invalidArgument, REASONS, toConnectError } from "../shared/domain/errors.js";
import { dbCall } from "../shared/db/pg.js";
import { PayoutService, PayoutState } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
import { checkBeneficiary, checkId, checkMoney, checkPageSize, checkText } from "../shared/domain/validation.js";
import type { CallerIdentity } from "./caller-identity.js";
import { KeyReusedError, type CreatePayout } from "./create-payout.js";
import { checkIdempotencyKey, EXPIRES_AT_HEADER, readIdempotencyKey, REPLAYED_HEADER, RETENTION_HEADER } from "./idempotency.js";
import { decodePageToken, encodePageToken, isTimestampText } from "../shared/domain/page-token.js";
import { stateName, toPayout } from "./payout-message.js";
import type { PayoutStore } from "./payout-store.js";
import { currentTraceparent } from "../shared/observability/tracing.js";

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The W3C traceparent of the creating request, stored so the executor's work joins the same
 * trace. A malformed one is ignored, as W3C Trace Context says, rather than failing a payout.
 */
export function readTraceparent(headers: Headers): string | null {
  // Prefer this server's own CreatePayout span (so the executor's span hangs under it); fall back
  // to the caller's header when tracing is off in this process.
  const value = currentTraceparent() ?? headers.get("traceparent");
  if (!value || !TRACEPARENT.test(value) || value.startsWith("ff") || /^..-0{32}-/.test(value) || /-0{16}-..$/.test(value)) return null;
  return value;
}

/** Reads never change money, but must still say "unavailable" clearly (and retryably). */
const readPaydb = <T>(fn: () => Promise<T>) => dbCall("PAYDB", fn);

export function payoutRoutes(deps: { createPayout: CreatePayout; payouts: PayoutStore; callerIdentity: CallerIdentity; keyRetentionMs: number }) {
  const retentionSeconds = String(Math.floor(deps.keyRetentionMs / 1000));
  const { createPayout, payouts, callerIdentity } = deps;
  return (router: ConnectRouter) =>
    router.service(PayoutService, {
      async createPayout(req, ctx) {
        const key = readIdempotencyKey(ctx.requestHeader);
        const accountId = checkId("account_id", req.accountId);
        const amount = checkMoney("amount", req.amount);
        const beneficiary = checkBeneficiary("beneficiary", req.beneficiary);
        const clientReference = checkText("client_reference", req.clientReference, 0, 128);
        const run = createPayout({
          clientId: callerIdentity(ctx),
          key,
          request: req,
          accountId,
          amountMinor: amount.amountMinor,
          currency: amount.currency,
          beneficiary,
          clientReference,
          traceparent: readTraceparent(ctx.requestHeader),
        });
        let result;
        try {
          result = await run;
        } catch (err) {
          // The key stays bound to its first body until then: the client learns when it is free.
          // (On the refusal's own metadata: a handler's response headers are not sent with an error.)
          if (err instanceof KeyReusedError) {
            const refusal = toConnectError(err);
            refusal.metadata.set(EXPIRES_AT_HEADER, err.keyExpiresAt.toISOString());
            refusal.metadata.set(RETENTION_HEADER, retentionSeconds);
            throw refusal;
          }
          throw err;
        }
        ctx.responseHeader.set(EXPIRES_AT_HEADER, result.keyExpiresAt.toISOString());
        ctx.responseHeader.set(RETENTION_HEADER, retentionSeconds);
        if (result.replayed) ctx.responseHeader.set(REPLAYED_HEADER, "true");
        return result.response;
      },

      async lookupPayout(req, ctx) {
        const clientId = callerIdentity(ctx);
        switch (req.by.case) {
          case "idempotencyKey": {
            if (req.by.value === "") throw invalidArgument("idempotency_key", REASONS.FIELD_REQUIRED, "idempotency_key is empty");
            const key = checkIdempotencyKey(req.by.value, "idempotency_key");
            const row = await readPaydb(() => payouts.getByKey(clientId, key));
            // Another client's payout is indistinguishable from a missing one; the key is not echoed.
            if (!row) throw new DomainError(REASONS.PAYOUT_NOT_FOUND, "no payout was created with this idempotency key", { field: "idempotency_key" });
            return { payout: toPayout(row) };
          }
          case "clientReference": {
            if (req.by.value === "") throw invalidArgument("client_reference", REASONS.FIELD_REQUIRED, "client_reference is empty");
            const reference = checkText("client_reference", req.by.value, 1, 128);
            const rows = await readPaydb(() => payouts.getByClientReference(clientId, reference));
            if (rows.length === 0) throw new DomainError(REASONS.PAYOUT_NOT_FOUND, "no payout has this client reference", { field: "client_reference" });
            // Never pick one: the caller would take another payout's state for its own.
            if (rows.length > 1) {
              throw new DomainError(
                REASONS.CLIENT_REFERENCE_AMBIGUOUS,
                "more than one of your payouts has this client reference; look it up by idempotency key, or list them",
                { field: "client_reference" },
              );
            }
            return { payout: toPayout(rows[0]!) };
          }
          default:
            throw invalidArgument("by", REASONS.FIELD_REQUIRED, "name the payout by idempotency_key or client_reference");
        }
      },

      async getPayout(req, ctx) {
        const payoutId = checkId("payout_id", req.payoutId);
        const row = await readPaydb(() => payouts.get(callerIdentity(ctx), payoutId));
        // Another client's payout is indistinguishable from a missing one.
        if (!row) throw new DomainError(REASONS.PAYOUT_NOT_FOUND, "no such payout", { payout_id: payoutId });
        return { payout: toPayout(row) };
      },

      async listPayouts(req, ctx) {
        const accountId = req.accountId === "" ? undefined : checkId("account_id", req.accountId);
        const state = req.state === PayoutState.UNSPECIFIED ? undefined : stateName(req.state);
        if (req.state !== PayoutState.UNSPECIFIED && state === undefined) {
          throw invalidArgument("state", REASONS.FIELD_INVALID, "state is not a known payout state");
        }
        const limit = checkPageSize("page_size", req.pageSize, 50, 500);
        // A token pages only the list and filter it was issued for.
        const scope = `ListPayouts:${JSON.stringify([req.accountId, req.state])}`;
        const position = decodePageToken(req.pageToken, scope, isTimestampText);
        const after = position && { createdAt: position.at, payoutId: position.id };
        const rows = await readPaydb(() => payouts.list(callerIdentity(ctx), { accountId, state }, limit + 1, after));
        const page = rows.slice(0, limit);
        const last = page[page.length - 1];
        return {
          payouts: page.map(toPayout),
          nextPageToken: rows.length > limit && last ? encodePageToken({ at: last.cursor, id: last.payout_id }, scope) : "",
        };
      },
    });
}
