/**
 * Who is calling. Idempotency keys and payout reads are scoped to this identity, so one client
 * can never read (or replay) another client's answer.
 *
 * Under mutual TLS the identity is the one in the caller's verified client certificate
 * (services/shared/process/identity.ts); the authorization policy has already refused callers that are
 * not configured clients (PAYOUTS_CLIENT_IDENTITIES). On cleartext loopback (tests, a laptop)
 * every caller is the configured default client.
 */
import type { HandlerContext } from "@connectrpc/connect";
import { peerIdentityKey } from "../shared/process/identity.js";

/** Resolves the calling client's identity from a handler context. */
export type CallerIdentity = (ctx: HandlerContext) => string;

/** The certificate's identity when there is one, else `defaultClientId`. */
export function createCallerIdentity(defaultClientId: string): CallerIdentity {
  return function callerIdentity(ctx: HandlerContext): string {
    return ctx.values.get(peerIdentityKey) ?? defaultClientId;
  };
}
