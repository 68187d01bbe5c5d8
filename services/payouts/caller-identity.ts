/**
 * Who is calling. Idempotency keys and payout reads are scoped to this identity, so one client
 * can never read (or replay) another client's answer.
 *
 * Until authentication lands every caller is the configured default client. This is the one
 * place that changes when mTLS arrives: derive the identity from the verified peer
 * certificate here, and every store lookup is already keyed by it.
 */
import type { HandlerContext } from "@connectrpc/connect";

/** Resolves the calling client's identity from a handler context. */
export type CallerIdentity = (ctx: HandlerContext) => string;

/** The pre-authentication identity: every caller is `defaultClientId`. */
export function createCallerIdentity(defaultClientId: string): CallerIdentity {
  return function callerIdentity(_ctx: HandlerContext): string {
    return defaultClientId;
  };
}
