/**
 * Authorization by method: a policy maps `<fully.qualified.Service>/<Method>` (or
 * `<Service>/*`) to the identities allowed to call it. Active whenever the server runs mutual
 * TLS (callers are identified by their certificates; see identity.ts). Default deny: a method
 * the policy does not name is refused. grpc.health.v1 is open to everyone (probes carry no
 * certificate). gRPC reflection is open to every verified identity (reflection.ts).
 *
 * Denials are permission_denied with ErrorInfo reason PERMISSION_DENIED (metadata: identity,
 * method), counted in railfence_rpc_permission_denied_total{component,rpc_service,rpc_method} (`component`
 * is the registry's default label; identities stay out of labels: unbounded cardinality)
 * and logged once, here.
 */
import type { Interceptor } from "@connectrpc/connect";
import { Counter, type Registry } from "prom-client";
import { railError, REASONS } from "../domain/errors.js";
import { peerIdentityKey } from "../process/identity.js";
import type { Logger } from "../process/logger.js";
import { REFLECTION_SERVICES } from "../rpc/reflection.js";

/** Method (or `Service/*`) -> identities allowed. */
export type AuthzPolicy = Readonly<Record<string, readonly string[]>>;

const HEALTH_SERVICE = "grpc.health.v1.Health";

/** The identities allowed to call `service/method` under policy (empty: nobody). */
export function allowedIdentities(policy: AuthzPolicy, service: string, method: string): readonly string[] {
  return policy[`${service}/${method}`] ?? policy[`${service}/*`] ?? [];
}

function deniedCounter(registry: Registry): Counter<"rpc_service" | "rpc_method"> {
  const name = "railfence_rpc_permission_denied_total";
  // A process may run several servers on one registry (rail-stub + its control API).
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Counter<"rpc_service" | "rpc_method">;
  return new Counter({
    name,
    help: "Calls refused by the authorization policy (or without a verified client certificate)",
    labelNames: ["rpc_service", "rpc_method"] as const,
    registers: [registry],
  });
}

/** The interceptor enforcing policy. */
export function authorization(policy: AuthzPolicy, registry: Registry, logger: Logger): Interceptor {
  const denied = deniedCounter(registry);
  return (next) => async (req) => {
    const service = req.service.typeName;
    if (service === HEALTH_SERVICE) return next(req);
    const method = req.method.name;
    const identity = req.contextValues.get(peerIdentityKey);
    if (identity !== undefined && allowedIdentities(policy, service, method).includes(identity)) return next(req);
    // Reflection describes the schema (public in the repository), never state: any verified identity.
    if (identity !== undefined && REFLECTION_SERVICES.includes(service)) return next(req);
    denied.inc({ rpc_service: service, rpc_method: method });
    const procedure = `${service}/${method}`;
    logger.warn({ event: "permission_denied", identity: identity ?? null, procedure }, "call refused by authorization policy");
    throw railError(
      REASONS.PERMISSION_DENIED,
      identity === undefined ? `${procedure} needs a verified client certificate` : `identity ${identity} may not call ${procedure}`,
      { identity: identity ?? "", method: procedure },
    );
  };
}

/** Fully qualified service names, so the policy table stays readable. */
const S = {
  rail: "railfence.rail.v1.RailService",
  railControl: "railfence.railcontrol.v1.RailControlService",
  proxy: "railfence.railproxy.v1.RailProxyService",
  lock: "railfence.lock.v1.LockService",
  payouts: "railfence.payouts.v1.PayoutService",
} as const;

const PROXY_READERS = ["executor", "reconciler", "operator"];
/**
 * The daily audit (`railfence check` in the audit CronJob) reads the rail's statement and
 * nothing else: its own identity rather than the operator's, whose certificate could resolve
 * submissions and create payouts.
 */
const AUDITOR = "auditor";

/** The railfence policy per server (docs/security.md has the same table). */
export const POLICIES = {
  /** The rail takes payments only from the fencing proxy (on top of its bearer credential). */
  railStub: { [`${S.rail}/*`]: ["rail-proxy"] },
  /** Fault injection (tests and drills): operators only. */
  railControl: { [`${S.railControl}/*`]: ["operator"] },
  railProxy: {
    [`${S.proxy}/SubmitPayout`]: ["executor"],
    // [rule:d4-who-resolves]
    [`${S.proxy}/ResolveSubmission`]: ["reconciler", "operator"],
    [`${S.proxy}/ListUnresolved`]: PROXY_READERS,
    [`${S.proxy}/GetSubmission`]: PROXY_READERS,
    [`${S.proxy}/GetRailStatement`]: [...PROXY_READERS, AUDITOR],
    [`${S.proxy}/ListPayoutSubmissions`]: PROXY_READERS,
    [`${S.proxy}/ListNotPaidResolutions`]: ["reconciler", "operator"],
    [`${S.proxy}/RecordContradiction`]: ["reconciler", "operator"],
  },
  lock: {
    [`${S.lock}/Acquire`]: ["executor"],
    [`${S.lock}/Renew`]: ["executor"],
    [`${S.lock}/Release`]: ["executor"],
    [`${S.lock}/Inspect`]: ["executor", "operator"],
  },
  /** Every payouts method for the configured client identities (PAYOUTS_CLIENT_IDENTITIES). */
  payouts: (clients: readonly string[]): AuthzPolicy => ({ [`${S.payouts}/*`]: clients }),
} satisfies Record<string, AuthzPolicy | ((c: readonly string[]) => AuthzPolicy)>;
