/** Every C5 scenario, by name. */
import { paydbFailover } from "./paydb-failover.js";
import { etcdQuorum } from "./etcd-quorum.js";
import { paydbOutage } from "./paydb-outage.js";
import { paydbRestore } from "./paydb-restore.js";
import { pausedHolder } from "./paused-holder.js";
import { railAmbiguity } from "./rail-ambiguity.js";
import { replicaKill } from "./replica-kill.js";
import { SOAK_GUARDS, soak } from "./soak.js";
import type { Scenario } from "./scenario.js";

export const SCENARIOS: Scenario[] = [
  pausedHolder({ name: "paused-holder", summary: "§5.1 SIGSTOP a holder past its lease; its submission is FENCED_OUT", fencingEnabled: true }),
  pausedHolder({ name: "fencing-off", summary: "§5.2 the same with fencing disabled: the checker must find the double payment", fencingEnabled: false }),
  replicaKill,
  pausedHolder({
    name: "restart-amnesia",
    summary: "§5.4 every proxy restarts while the holder is paused (failure i)",
    fencingEnabled: true,
    restartProxies: true,
  }),
  pausedHolder({
    name: "two-replicas",
    summary: "§5.5 the stale holder talks to the replica that never saw the newer token (failure ii)",
    fencingEnabled: true,
    splitReplicas: true,
  }),
  pausedHolder({ name: "stale-read", summary: "§5.6 a proxy against a paydb standby refuses to start (failure iii)", fencingEnabled: true, standby: true }),
  railAmbiguity,
  paydbOutage,
  pausedHolder({
    name: "lock-outage",
    summary: "§5.9 the lock backend stops; the stale holder is still fenced by the proxy",
    fencingEnabled: true,
    lockOutage: true,
  }),
  // etcd only (decision 040): `all` runs it on the etcd backend and says it skipped it on pg.
  etcdQuorum({
    name: "etcd-quorum",
    summary: "three-member etcd under load: leader SIGKILL, member SIGSTOP, quorum loss; the lock fails closed and tokens only go up",
  }),
  // Negative controls for ADR-007 failures i and ii: the same drills against the rejected
  // in-memory mark must let the stale holder through, and the checker must say so.
  pausedHolder({
    name: "restart-amnesia-memory",
    summary: "negative control: restart-amnesia with in-memory marks: double payment detected",
    fencingEnabled: true,
    restartProxies: true,
    memoryMarks: true,
  }),
  pausedHolder({
    name: "two-replicas-memory",
    summary: "negative control: two-replicas with in-memory marks: double payment detected",
    fencingEnabled: true,
    splitReplicas: true,
    memoryMarks: true,
  }),
  paydbFailover({
    name: "paydb-failover",
    summary: "paydb's primary SIGKILLed under load, again and again; synchronous standby promoted behind a stable address: nothing lost",
    synchronous: true,
    kills: 20,
  }),
  // Negative control: the same kills with asynchronous replication (declared managed-ha).
  paydbFailover({
    name: "paydb-failover-async",
    summary: "negative control: the same failovers with asynchronous replication: acknowledged intents lost, the audit finds what the rail paid",
    synchronous: false,
    kills: 5,
  }),
  paydbRestore({
    name: "paydb-restore",
    summary: "paydb restored to a point before the last intents, payouts in flight; the documented procedure: nothing paid twice",
    blind: false,
  }),
  // Negative control: the same restore without the reconciler's payments-without-intent pass.
  paydbRestore({
    name: "paydb-restore-blind",
    summary: "negative control: the same restore, the reconciler's payments-without-intent pass off: paid twice, and caught",
    blind: true,
  }),
  // Negative control for the quorum drill's lock checks (etcd only, decision 040).
  etcdQuorum({
    name: "etcd-quorum-fork",
    summary: "negative control: the lock follows a member forked alone while quorum is lost: backwards tokens detected",
    fork: true,
  }),
];

/**
 * The bounded soak `npm test` runs on both backends (the full one is `npm run drill -- soak`,
 * docs/drills.md): a few hundred payouts, every nemesis kind at least once.
 */
const BOUNDED_SOAK_OPTIONS = { payouts: 150, minutes: 1.2, accounts: 20 };
export const BOUNDED_SOAK = soak(BOUNDED_SOAK_OPTIONS);

/**
 * The bounded soak once per guard, with that guard alone removed: each must end in the violation
 * its invariant names (soak.ts CAUGHT_BY). The guards live in rail-proxy, so one lock backend is
 * enough (pg in `npm test`).
 */
export const BOUNDED_SOAK_CONTROLS = SOAK_GUARDS.map((g) => soak({ ...BOUNDED_SOAK_OPTIONS, disabledGuard: g }));

export function scenario(name: string): Scenario {
  const s = SCENARIOS.find((x) => x.name === name);
  if (!s) throw new Error(`unknown scenario ${name}; one of: ${SCENARIOS.map((x) => x.name).join(", ")}, all`);
  return s;
}
