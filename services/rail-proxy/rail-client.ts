/**
 * The only rail client in railfence (ADR-007 D1). It attaches the credential to every call and
 * makes exactly one attempt per submission, bounded by a deadline. It never retries (FR-20):
 * a retry to a non-idempotent rail is a second payment.
 */
import { createClient, type Interceptor } from "@connectrpc/connect";
import { serviceTransport, type ConnectionTiming } from "../shared/rpc/client-transport.js";
import { RailService } from "../shared/gen/railfence/rail/v1/rail_pb.js";
import type { TlsSettings } from "../shared/process/tls.js";

/**
 * How long a rail request can take to leave the process, bounded (docs/threat-model.md, the
 * residual window): a new connection must be made within the pre-forward budget (else the call
 * fails with nothing sent, NOT_FORWARDED), and a connection that answers no PING within an
 * interval of the rail deadline is reset, discarding whatever it could not deliver. So a request
 * handed to the socket leaves within 2 x deadline, or never; reconciler/config.ts counts that
 * in the settlement window's lower bound.
 */
// [rule:rail-lag-timing]
export function railConnectionTiming(railDeadlineMs: number, forwardBudgetMs: number | undefined): ConnectionTiming {
  // Connected at start: the first submission after a (re)start does not spend its budget on it.
  return { pingIntervalMs: railDeadlineMs, connectTimeoutMs: forwardBudgetMs ?? railDeadlineMs, connectAtStart: true };
}
// [/rule:rail-lag-timing]

/** tls: with mutual TLS the proxy's certificate (identity rail-proxy) is checked by the rail too. */
// [rule:d1-one-rail-client]
export function createRailClient(baseUrl: string, credential: string, tls?: TlsSettings, timing: ConnectionTiming = {}) {
  const authorization = `Bearer ${credential}`;
  const withCredential: Interceptor = (next) => (req) => {
    req.header.set("authorization", authorization);
    return next(req);
  };
  // The credential rides in a header that tracing never records (spans carry rpc.* attributes only).
  // [rule:d4-no-retry]
  return createClient(RailService, serviceTransport(baseUrl, tls, [withCredential], timing));
}

export type RailClient = ReturnType<typeof createRailClient>;
