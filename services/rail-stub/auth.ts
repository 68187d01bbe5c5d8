/**
 * The rail's credential check: `authorization: Bearer <credential>`, compared in constant
 * time (both sides hashed first so lengths never leak either). Anything else: unauthenticated.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Interceptor } from "@connectrpc/connect";
import { railError, REASONS } from "../shared/domain/errors.js";

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

export function credentialMatches(header: string | null, expectedDigest: Buffer): boolean {
  const match = header ? /^Bearer (.+)$/.exec(header) : null;
  const presented = digest(match?.[1] ?? "");
  // Always compare, even when the header is missing, so timing says nothing about why.
  return timingSafeEqual(presented, expectedDigest) && match !== null;
}

/** Guards one service (by its type name); health and other services stay open. */
export function requireCredential(serviceTypeName: string, credential: string): Interceptor {
  const expected = digest(credential);
  return (next) => async (req) => {
    if (req.service.typeName === serviceTypeName && !credentialMatches(req.header.get("authorization"), expected)) {
      throw railError(REASONS.RAIL_CREDENTIAL_INVALID, "missing or wrong rail credential");
    }
    return next(req);
  };
}
