/**
 * Lease ids are bearer capabilities: whoever presents one may renew or release the lease. They
 * are 192 random bits (base64url, 32 characters), so they cannot be guessed, and backends keep
 * only their SHA-256, so reading lockdb or etcd does not reveal a usable id.
 */
import { createHash, randomBytes } from "node:crypto";

const LEASE_ID_BYTES = 24;
/** base64url of 24 bytes: exactly 32 characters, no padding. */
export const LEASE_ID_PATTERN = /^[A-Za-z0-9_-]{32}$/;

export function newLeaseId(): string {
  return randomBytes(LEASE_ID_BYTES).toString("base64url");
}

/** SHA-256 digest of a lease id (what backends store and compare). */
export function leaseHash(leaseId: string): Buffer {
  return createHash("sha256").update(leaseId, "utf8").digest();
}
