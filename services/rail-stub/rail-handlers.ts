/**
 * RailService: the fictional third party. Not idempotent, no compare-and-set: every accepted
 * call books a new payment. Faults from the plan shape what the caller experiences.
 */
import { randomBytes } from "node:crypto";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Counter } from "prom-client";
import { invalidArgument, railError, REASONS } from "../shared/domain/errors.js";
import { FaultKind } from "../shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { PaymentStatus, RailService } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import { checkPageSize, checkText } from "../shared/domain/validation.js";
import type { FaultPlan } from "./faults.js";
import type { BookedPayment, LedgerStore } from "./ledger-store.js";
import { int8 } from "../shared/domain/int8.js";

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/** Waits until the caller gives up (its deadline or cancel), then fails: the answer is lost. */
const hangUntilCallerLeaves = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(railError(REASONS.CANCELED, "caller left")), { once: true });
  });

/**
 * Required, bounded free text (the shared character rules: no control, bidi or invisible
 * characters). A NUL in particular cannot be stored in PostgreSQL text: unchecked, it turned a
 * hostile body into an internal error.
 */
function checkRailText(field: string, value: string, max: number): void {
  checkText(field, value, 1, max);
}

/** A status value the rail proto does not define (what a rail that added one after this build sends). */
export const UNDOCUMENTED_STATUS = 7;

export interface RailMetrics {
  payments: Counter<"status">;
}

export function railRoutes(ledger: LedgerStore, faults: FaultPlan, metrics: RailMetrics) {
  const book = async (
    req: { clientReference: string; accountId: string; beneficiary: string; amountMinor: bigint; currency: string },
    status: "ACCEPTED" | "REJECTED",
    reason: string,
  ) => {
    const p = await ledger.book({ ...req, railReference: `rr_${randomBytes(10).toString("hex")}`, status, reason });
    metrics.payments.inc({ status: status.toLowerCase() });
    return p;
  };
  const answer = (p: BookedPayment) => ({
    railReference: p.railReference,
    status: p.status === "ACCEPTED" ? PaymentStatus.ACCEPTED : PaymentStatus.REJECTED,
    reason: p.reason,
  });

  // [rule:rail-books]
  return (router: ConnectRouter) =>
    router.service(RailService, {
      async submitPayment(req, ctx: HandlerContext) {
        faults.submitCalls += 1n;
        checkRailText("client_reference", req.clientReference, 128);
        checkRailText("account_id", req.accountId, 128);
        checkRailText("beneficiary", req.beneficiary, 256);
        if (!req.amount || req.amount.amountMinor <= 0n || !/^[A-Z]{3}$/.test(req.amount.currency)) {
          throw invalidArgument("amount", REASONS.AMOUNT_INVALID, "amount must be > 0 with an ISO-4217 currency");
        }
        const payment = {
          clientReference: req.clientReference,
          accountId: req.accountId,
          beneficiary: req.beneficiary,
          amountMinor: req.amount.amountMinor,
          currency: req.amount.currency,
        };
        const fault = faults.take(req.clientReference);
        switch (fault?.kind) {
          case FaultKind.LATENCY:
            await sleep(fault.latencyMs, ctx.signal);
            return answer(await book(payment, "ACCEPTED", ""));
          case FaultKind.REJECT:
            return answer(await book(payment, "REJECTED", "INJECTED_REJECT"));
          case FaultKind.LAND_THEN_LOSE_ANSWER: {
            const booked = await book(payment, "ACCEPTED", "");
            if (fault.latencyMs === 0) return hangUntilCallerLeaves(ctx.signal);
            await sleep(fault.latencyMs, ctx.signal);
            return answer(booked);
          }
          case FaultKind.NEVER_LAND_HANG:
            return hangUntilCallerLeaves(ctx.signal);
          case FaultKind.LAND_THEN_ANSWER_STATUS_UNSET:
            return { ...answer(await book(payment, "ACCEPTED", "")), status: PaymentStatus.UNSPECIFIED };
          case FaultKind.LAND_THEN_ANSWER_STATUS_UNKNOWN:
            return { ...answer(await book(payment, "ACCEPTED", "")), status: UNDOCUMENTED_STATUS as PaymentStatus };
          default:
            return answer(await book(payment, "ACCEPTED", ""));
        }
        // [/rule:rail-books]
      },

      async listPayments(req) {
        const limit = checkPageSize("page_size", req.pageSize, 500, 1000);
        // google.protobuf.Timestamp's valid range; outside it the date is not one PostgreSQL (or JS) can hold.
        if (
          req.since &&
          (req.since.seconds < -62_135_596_800n || req.since.seconds > 253_402_300_799n || req.since.nanos < 0 || req.since.nanos > 999_999_999)
        ) {
          throw invalidArgument("since", REASONS.TIMESTAMP_INVALID, "since must be a valid timestamp between 0001-01-01 and 9999-12-31");
        }
        const page = await ledger.list(int8(req.afterSequence), req.since ? timestampDate(req.since) : undefined, limit);
        return {
          payments: page.payments.map((p) => ({
            railReference: p.railReference,
            clientReference: p.clientReference,
            accountId: p.accountId,
            beneficiary: p.beneficiary,
            amount: { amountMinor: p.amountMinor, currency: p.currency },
            status: p.status === "ACCEPTED" ? PaymentStatus.ACCEPTED : PaymentStatus.REJECTED,
            reason: p.reason,
            bookedAt: timestampFromDate(p.bookedAt),
            sequence: p.sequence,
          })),
          hasMore: page.hasMore,
          coveredUntil: timestampFromDate(page.coveredUntil),
        };
      },
    });
}
