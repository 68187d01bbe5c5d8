/**
 * Request checks for the Lock service, run before any backend call so bad input changes
 * nothing. Every failure is INVALID_ARGUMENT with a reason and the field name.
 */
import { invalidArgument, REASONS } from "../shared/domain/errors.js";
import { checkText } from "../shared/domain/validation.js";
import { LEASE_ID_PATTERN } from "./lease-id.js";

/** ASCII only, and no characters that would need escaping in an etcd key path or a log line. */
export const LOCK_KEY_PATTERN = /^[A-Za-z0-9._:/-]{1,200}$/;
export const TTL_MS = { min: 100, max: 600_000 } as const;
export const WAIT_MS = { min: 0, max: 60_000 } as const;

export function checkKey(value: string): string {
  if (value.length === 0) throw invalidArgument("key", REASONS.FIELD_REQUIRED, "key is required");
  if (!LOCK_KEY_PATTERN.test(value)) throw invalidArgument("key", REASONS.KEY_INVALID, "key must be 1-200 characters of [A-Za-z0-9._:/-]");
  return value;
}

export function checkOwner(value: string): string {
  checkText("owner", value, 1, 200);
  // Printable ASCII only: owners show up in operator tools and logs.
  if (!/^[\x20-\x7e]+$/.test(value)) throw invalidArgument("owner", REASONS.FIELD_INVALID, "owner must be printable ASCII");
  return value;
}

export function checkTtl(value: number): number {
  if (value < TTL_MS.min || value > TTL_MS.max) {
    throw invalidArgument("ttl_ms", REASONS.TTL_INVALID, `ttl_ms must be between ${TTL_MS.min} and ${TTL_MS.max}`);
  }
  return value;
}

export function checkWait(value: number): number {
  if (value > WAIT_MS.max) throw invalidArgument("wait_ms", REASONS.WAIT_INVALID, `wait_ms must be between ${WAIT_MS.min} and ${WAIT_MS.max}`);
  return value;
}

export function checkLeaseId(value: string): string {
  if (value.length === 0) throw invalidArgument("lease_id", REASONS.FIELD_REQUIRED, "lease_id is required");
  if (!LEASE_ID_PATTERN.test(value)) throw invalidArgument("lease_id", REASONS.LEASE_ID_INVALID, "lease_id is not a lease id this service issued");
  return value;
}
