/**
 * The Idempotency-Key contract of RESILIENCE.md for CreatePayout (SPEC "Payouts API"):
 * reading and checking the key, fingerprinting the request, and deciding what a key's
 * current marker means. Stores hold the rows; this module holds the rules.
 *
 * Retention rule (decided, see docs/payouts-api.md): within IDEMPOTENCY_RETENTION_MS of the
 * success the answer is pinned, whether or not the purge job has run. After it the key is
 * new, whether or not the row has been purged yet, so the answer never depends on purge lag.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { createHash, randomUUID } from "node:crypto";
import { DomainError, REASONS } from "../shared/domain/errors.js";
import { CreatePayoutRequestSchema, type CreatePayoutRequest } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
import type { ClaimParams, IdempotencyStore } from "./idempotency-store.js";

/** Header (and gRPC metadata) carrying the key. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
/** Response header on an answer served from the store. */
export const REPLAYED_HEADER = "idempotency-replayed";
/**
 * Response header on every answer tied to a stored key (created, replayed, key reused): the
 * RFC 3339 UTC instant the server forgets the key. A client must not send the key after it.
 * Millisecond precision, rounded down from paydb's microseconds: never later than the truth.
 */
export const EXPIRES_AT_HEADER = "idempotency-key-expires-at";
/**
 * How long this server keeps a key (whole seconds, rounded down), on every CreatePayout answer
 * that stored one: a client applies it to keys it sent but never heard back about, whose own
 * expiry it therefore never learned (decision 051).
 */
export const RETENTION_HEADER = "railfence-idempotency-retention-seconds";
export const MAX_KEY_LENGTH = 255;
/** Visible ASCII only (0x21-0x7E): no spaces, no control characters, no look-alikes. */
const KEY_PATTERN = /^[\x21-\x7e]+$/;

/**
 * Reads and checks the key. Missing (or empty) -> IDEMPOTENCY_KEY_MISSING; too long or any
 * character outside 0x21-0x7E -> IDEMPOTENCY_KEY_INVALID. The key is never echoed back.
 */
export function readIdempotencyKey(headers: Headers): string {
  const key = headers.get(IDEMPOTENCY_KEY_HEADER);
  if (key === null || key === "") {
    throw new DomainError(REASONS.IDEMPOTENCY_KEY_MISSING, "header idempotency-key is required (a UUID is recommended)", {
      field: IDEMPOTENCY_KEY_HEADER,
    });
  }
  return checkIdempotencyKey(key, IDEMPOTENCY_KEY_HEADER);
}

/** A non-empty key's form, checked where it arrives (`field`: the header, or LookupPayout's field). */
export function checkIdempotencyKey(key: string, field: string): string {
  if (key.length > MAX_KEY_LENGTH || !KEY_PATTERN.test(key)) {
    const where = field === IDEMPOTENCY_KEY_HEADER ? "header idempotency-key" : field;
    throw new DomainError(REASONS.IDEMPOTENCY_KEY_INVALID, `${where} must be 1-${MAX_KEY_LENGTH} visible ASCII characters`, { field });
  }
  return key;
}

/**
 * sha256 of the canonical request: the known fields copied into a fresh message (so unknown
 * fields and the wire encoding play no part) and serialized with protobuf binary, which is
 * deterministic for a given message. A request sent as Connect JSON and the same request sent
 * as gRPC binary therefore have the same fingerprint; `"clientReference": ""` and an absent
 * field are the same request.
 */
export function requestFingerprint(req: CreatePayoutRequest): Buffer {
  const canonical = create(CreatePayoutRequestSchema, {
    accountId: req.accountId,
    amount: req.amount ? { amountMinor: req.amount.amountMinor, currency: req.amount.currency } : undefined,
    beneficiary: req.beneficiary,
    clientReference: req.clientReference,
  });
  return createHash("sha256").update(toBinary(CreatePayoutRequestSchema, canonical)).digest();
}

/** What a key means for this request. */
export type ClaimOutcome =
  /** We own the key: run, then pin the answer with this claim id. */
  | { kind: "claimed"; claimId: string; takeover: boolean }
  /** The key already holds a success for this body: answer with it. */
  | { kind: "replay"; response: Buffer; expiresAt: Date }
  /** Another request with this key is running. */
  | { kind: "conflict"; retryAfterMs: number }
  /** The key is bound to a different body. */
  | { kind: "reused"; expiresAt: Date };

/** A marker can change under us (released, purged, taken over): re-read a few times at most. */
const MAX_ROUNDS = 4;

/** Settles what the key means, claiming it when it is free. Never waits on another request. */
export async function claimKey(store: IdempotencyStore, p: Omit<ClaimParams, "claimId">): Promise<ClaimOutcome> {
  const params: ClaimParams = { ...p, claimId: randomUUID() };
  for (let round = 0; round < MAX_ROUNDS; round++) {
    if (await store.tryInsert(params)) return { kind: "claimed", claimId: params.claimId, takeover: false };
    const row = await store.inspect(p.clientId, p.key);
    if (!row) continue; // released or purged between our insert and read: try again
    const dead = row.state === "IN_PROGRESS" ? !row.locked : !row.live;
    if (dead) {
      // A crashed attempt (lease over) or a success past retention: the key is free again,
      // for any body (a crashed attempt created nothing: its payout and DONE commit together).
      if (await store.takeOver(params)) return { kind: "claimed", claimId: params.claimId, takeover: true };
      continue; // someone else took it, or it changed: look again
    }
    if (!row.fingerprint.equals(p.fingerprint)) return { kind: "reused", expiresAt: row.expires_at };
    if (row.state === "DONE" && row.response) return { kind: "replay", response: row.response, expiresAt: row.expires_at };
    return { kind: "conflict", retryAfterMs: retryHint(row.lock_remaining_ms) };
  }
  return { kind: "conflict", retryAfterMs: 1000 };
}

/** "Wait briefly": most requests finish in milliseconds; never tell a client to wait past the lease. */
function retryHint(lockRemainingMs: number): number {
  return Math.max(100, Math.min(1000, Math.ceil(lockRemainingMs)));
}
