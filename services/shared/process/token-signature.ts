/**
 * Signed fencing tokens. Fencing alone trusts whatever token a caller presents: a compromised
 * executor could send a token far above anything the lock service will ever issue and fence
 * its account out for good (no double payment, but a denial of service). When the lock service
 * and rail-proxy share a signing key, the lock service signs each grant's (key, token) and the
 * proxy refuses, in step 0, any token without a valid signature — so only tokens the lock
 * service really issued can move a mark. Verification needs only the key file, never the lock
 * backend (ADR-007 D6 stays true).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { ConfigError, readSecretFile } from "./config.js";

const DOMAIN = "railfence.fencing-token.v1";

export function signToken(key: Buffer, lockKey: string, token: bigint): Uint8Array<ArrayBuffer> {
  return new Uint8Array(createHmac("sha256", key).update(`${DOMAIN}\n${lockKey}\n${token.toString()}`).digest());
}

export function tokenSignatureValid(key: Buffer, lockKey: string, token: bigint, signature: Uint8Array): boolean {
  const expected = signToken(key, lockKey, token);
  return signature.length === expected.length && timingSafeEqual(Buffer.from(signature), Buffer.from(expected));
}

/** The lock key an executor uses for an account (the proxy verifies against the same). */
export const accountLockKey = (accountId: string) => `account:${accountId}`;

/** A signing key from a file (at least 32 characters), or undefined when not configured. */
export function signingKeyFromFile(file: string | undefined, what: string): Buffer | undefined {
  if (!file) return undefined;
  const key = readSecretFile(file, what);
  if (key.length < 32) throw new ConfigError([`${what}: the key must be at least 32 characters`]);
  return Buffer.from(key, "utf8");
}
