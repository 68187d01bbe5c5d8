/**
 * The etcd quorum drill's verdict on the lock itself, from the grants and refusals its callers
 * saw (lock-grants.ts). Two safety rules become violations, named like the audit's invariants so
 * the report's table lists them; what only shows that the drill exercised its faults becomes a
 * failed expectation.
 *
 * - LOCK_TOKEN_ORDER: tokens per key strictly increase in real time, and none repeats.
 * - LOCK_NO_QUORUM_GRANT: no grant asked for after quorum was lost is answered before it is back.
 *
 * Each run also feeds both checks a planted bad grant: a check that cannot flag it proves nothing.
 */
import type { Violation } from "../invariants.js";
import { grantsWithoutQuorum, tokenOrderViolations, type ExecutorAttempt, type Grant, type ProbeCall } from "./lock-grants.js";

export const LOCK_TOKEN_ORDER = "LOCK_TOKEN_ORDER";
export const LOCK_NO_QUORUM_GRANT = "LOCK_NO_QUORUM_GRANT";

/** Prober calls refused while there was no quorum: fewer would not show the lock failing closed. */
export const MIN_REFUSED_WITHOUT_QUORUM = 3;

/** The reason the lock service gives when its backend cannot answer (fail closed). */
const UNAVAILABLE = "LOCK_BACKEND_UNAVAILABLE";

export interface QuorumWindow {
  /** Quorum was gone from here (both members down)... */
  lostAt: number;
  /** ...until here (the first of them back). */
  backAt: number;
  /** The cluster was healthy again from here. */
  healedAt: number;
}

export interface LockVerdict {
  violations: Violation[];
  failures: string[];
  notes: string[];
  counts: Record<string, number>;
}

export function checkLock(probes: ProbeCall[], attempts: ExecutorAttempt[], t: QuorumWindow): LockVerdict {
  const violations: Violation[] = [];
  const failures: string[] = [];
  const notes: string[] = [];
  const probeGrants: Grant[] = probes.flatMap((c) =>
    c.token === undefined ? [] : [{ key: c.key, token: c.token, askedAt: c.askedAt, answeredAt: c.answeredAt, source: "prober" }],
  );
  const grants = [...probeGrants, ...attempts.flatMap((a) => (a.token === undefined ? [] : [{ ...a, token: a.token }]))];
  const keys = new Set(grants.map((g) => g.key)).size;

  const order = tokenOrderViolations(grants);
  notes.push(`${grants.length} grants seen on ${keys} keys (${probeGrants.length} by the prober): ${order.length} out of order`);
  for (const detail of order) violations.push({ invariant: LOCK_TOKEN_ORDER, detail, row: {} });

  const without = grantsWithoutQuorum(grants, t.lostAt, t.backAt);
  for (const g of without) {
    violations.push({ invariant: LOCK_NO_QUORUM_GRANT, detail: `${g.key}: token ${g.token} granted to ${g.source} while there was no quorum`, row: {} });
  }

  // Failing closed, seen from both kinds of caller: calls asked and answered inside the window.
  const inside = (c: { askedAt: number; answeredAt: number }) => c.askedAt >= t.lostAt && c.answeredAt <= t.backAt;
  const probed = probes.filter(inside);
  const refused = probed.filter((c) => c.token === undefined);
  const unavailable = refused.filter((c) => c.refused === UNAVAILABLE).length;
  const executorRefusals = attempts.filter((a) => inside(a) && a.why?.includes(UNAVAILABLE)).length;
  notes.push(
    `without quorum (${t.backAt - t.lostAt} ms): the prober's ${probed.length} calls answered in it were ${refused.length} refused (${unavailable} ${UNAVAILABLE}), ` +
      `executors had ${executorRefusals} attempts refused by the lock; ${without.length} grants`,
  );
  if (unavailable < MIN_REFUSED_WITHOUT_QUORUM)
    failures.push(`only ${unavailable} prober calls were refused ${UNAVAILABLE} without quorum: the outage was not exercised`);
  // A refusal other than "unavailable" inside the window would mean etcd answered without quorum.
  for (const c of refused.filter((x) => x.refused !== UNAVAILABLE))
    failures.push(`${c.key}: refused ${c.refused} while there was no quorum (expected ${UNAVAILABLE})`);

  // The prober must see grants on both sides of the outage, or "none inside it" means nothing.
  const before = probes.filter((c) => c.token !== undefined && c.answeredAt < t.lostAt).length;
  const afterHeal = probes.filter((c) => c.token !== undefined && c.askedAt > t.healedAt).length;
  if (before === 0 || afterHeal === 0) failures.push(`the prober saw ${before} grants before the outage and ${afterHeal} after it: it cannot tell`);

  // Planted: a replay of the newest grant of a key, asked for after it was answered, and a grant
  // inside the window. Both checks must flag them.
  const newest = grants.reduce<Grant | undefined>((a, g) => (!a || g.answeredAt > a.answeredAt ? g : a), undefined);
  if (newest) {
    const replay: Grant = { ...newest, askedAt: newest.answeredAt + 1000, answeredAt: newest.answeredAt + 1001, source: "planted" };
    if (tokenOrderViolations([...grants, replay]).length <= order.length) failures.push("the order check did not flag a planted repeated token");
  }
  const planted: Grant = { key: "planted", token: 1n, askedAt: t.lostAt + 1, answeredAt: t.lostAt + 2, source: "planted" };
  if (grantsWithoutQuorum([planted], t.lostAt, t.backAt).length !== 1) failures.push("the quorum check did not flag a planted grant");

  return {
    violations,
    failures,
    notes,
    counts: {
      grantsSeen: grants.length,
      tokenOrderViolations: order.length,
      grantsWithoutQuorum: without.length,
      quorumLossMs: t.backAt - t.lostAt,
      proberRefusedWithoutQuorum: refused.length,
      executorRefusedWithoutQuorum: executorRefusals,
    },
  };
}
