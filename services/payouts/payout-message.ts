/** Maps payout rows to API messages, and mints payout ids. */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { randomBytes } from "node:crypto";
import { PayoutSchema, PayoutState, type Payout } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
import type { PayoutRow, PayoutStateName } from "./payout-store.js";
import { int8 } from "../shared/domain/int8.js";

export const STATE_NAMES: Record<PayoutStateName, PayoutState> = {
  PENDING: PayoutState.PENDING,
  PROCESSING: PayoutState.PROCESSING,
  PAID: PayoutState.PAID,
  FAILED: PayoutState.FAILED,
  UNKNOWN: PayoutState.UNKNOWN,
  NEEDS_ATTENTION: PayoutState.NEEDS_ATTENTION,
};

/** The enum value -> the column value (UNSPECIFIED and unknown numbers have none). */
export function stateName(state: PayoutState): PayoutStateName | undefined {
  for (const [name, value] of Object.entries(STATE_NAMES)) if (value === state) return name as PayoutStateName;
  return undefined;
}

export function toPayout(r: PayoutRow): Payout {
  return create(PayoutSchema, {
    payoutId: r.payout_id,
    accountId: r.account_id,
    amount: { amountMinor: int8(r.amount_minor), currency: r.currency },
    beneficiary: r.beneficiary,
    state: STATE_NAMES[r.state],
    fence: int8(r.fence),
    railReference: r.rail_reference ?? "",
    failureReason: r.failure_reason ?? "",
    createdAt: timestampFromDate(r.created_at),
    updatedAt: timestampFromDate(r.updated_at),
    clientReference: r.client_reference,
    attention: r.attention_reason
      ? { reason: r.attention_reason, detail: r.attention_detail ?? "", flaggedAt: r.attention_at ? timestampFromDate(r.attention_at) : undefined }
      : undefined,
  });
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * `po_` + 20 base32 characters (100 random bits): unguessable, so ids leak nothing about
 * volume or order, and inside the shared id alphabet [A-Za-z0-9._:-]{1,64} that the
 * rail-proxy and the rail accept as payout_id / client_reference.
 */
export function newPayoutId(): string {
  const bytes = randomBytes(20);
  let id = "po_";
  for (const b of bytes) id += BASE32[b & 31];
  return id;
}
