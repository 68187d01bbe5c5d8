/**
 * Every lock grant a drill saw, and the two checks the etcd quorum drill makes on them.
 *
 * The mesh's own guards (paydb's fence, the proxy's mark) refuse a token that does not advance,
 * so a lock that went backwards would show up downstream only as FENCED_OUT, never as a
 * violation. These checks look at the lock itself, from its callers' side:
 *
 * - order: for two grants of one key where the first was answered before the second was asked
 *   for (real time, one host clock), the second's token is higher; and no token of a key is
 *   handed out twice. A linearizable lock (etcd's revisions under quorum) gives both.
 * - quorum: no grant whose request started after quorum was lost was answered before it came
 *   back. A grant asked for earlier may still be answered inside the window (committed before).
 *
 * Grants come from two sources: the drill's prober, which calls Acquire itself and knows both
 * ends of each call, and the executors' logs, where an attempt's interval ([log time -
 * duration_ms, log time]) contains its Acquire call. Both intervals contain the true one, which
 * keeps the order check sound: "answered before asked" is never claimed when it was not so.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { LockService } from "../../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { errorReason } from "../../../services/shared/domain/errors.js";
import { accountLockKey } from "../../../services/shared/process/token-signature.js";
import type { DrillMesh } from "./drill-mesh.js";
import { pick, type Rng } from "./rng.js";

export interface Grant {
  key: string;
  token: bigint;
  /** Epoch ms: at or before the Acquire request was sent. */
  askedAt: number;
  /** Epoch ms: at or after the answer arrived. */
  answeredAt: number;
  source: string;
}

/** An Acquire the prober made: granted (token) or refused (why). */
export interface ProbeCall {
  key: string;
  askedAt: number;
  answeredAt: number;
  token?: bigint;
  refused?: string;
}

/**
 * Log lines of one process have ms timestamps; an attempt's duration is rounded to the ms. This
 * much slack keeps rounding from ever turning "overlapping" into "answered before asked".
 */
const CLOCK_SLACK_MS = 5;

/** Order violations among grants (see the header); empty when the lock behaved. */
export function tokenOrderViolations(grants: Grant[]): string[] {
  const problems: string[] = [];
  const byKey = new Map<string, Grant[]>();
  for (const g of grants) byKey.set(g.key, [...(byKey.get(g.key) ?? []), g]);
  for (const [key, list] of byKey) {
    const seen = new Map<bigint, Grant>();
    for (const g of list) {
      const twin = seen.get(g.token);
      if (twin) problems.push(`${key}: token ${g.token} handed out twice (${twin.source} and ${g.source})`);
      else seen.set(g.token, g);
    }
    // Sorted by answer time, a running maximum of tokens answered so far finds every pair
    // (earlier answered, later asked) with a token that did not go up, in O(n log n).
    const byAnswer = [...list].sort((a, b) => a.answeredAt - b.answeredAt);
    const byAsk = [...list].sort((a, b) => a.askedAt - b.askedAt);
    let i = 0;
    let highest: Grant | undefined;
    for (const g of byAsk) {
      while (i < byAnswer.length && byAnswer[i]!.answeredAt + CLOCK_SLACK_MS < g.askedAt) {
        const h = byAnswer[i++]!;
        if (!highest || h.token > highest.token) highest = h;
      }
      if (highest && g.token <= highest.token && g !== highest) {
        problems.push(
          `${key}: token ${g.token} (${g.source}, asked ${iso(g.askedAt)}) is not above token ${highest.token} (${highest.source}, answered ${iso(highest.answeredAt)})`,
        );
      }
    }
  }
  return problems;
}

/** Grants asked for after quorum was lost and answered before it came back. */
export function grantsWithoutQuorum(grants: Grant[], lostAt: number, backAt: number): Grant[] {
  return grants.filter((g) => g.askedAt >= lostAt && g.answeredAt <= backAt);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** One executor attempt, from its log: the interval that contains its Acquire call, and what came of it. */
export interface ExecutorAttempt {
  key: string;
  askedAt: number;
  answeredAt: number;
  source: string;
  /** The token it was granted, when its log says. */
  token?: bigint;
  /** Why it was given back, when it was deferred ("LOCK_BACKEND_UNAVAILABLE": the lock refused). */
  why?: string;
}

/**
 * Every executor attempt in the logs: an attempt's interval is [log time - duration_ms, log
 * time], which contains its Acquire call. Its token is on its attempt line or on the "fenced"
 * line before it; an attempt with neither got no grant it used.
 */
export function executorAttempts(drill: DrillMesh): ExecutorAttempt[] {
  const attempts: ExecutorAttempt[] = [];
  for (const e of drill.mesh.executors) {
    const fenced = new Map<string, string>();
    for (const line of e.lines) {
      if (!line.includes('"event":"fenced"') && !line.includes('"event":"payout_attempt"')) continue;
      const ev = JSON.parse(line) as {
        event: string;
        time: string;
        payout_id: string;
        account_id: string;
        fencing_token?: string;
        duration_ms?: number;
        why?: string;
      };
      if (ev.event === "fenced") {
        if (ev.fencing_token) fenced.set(ev.payout_id, ev.fencing_token);
        continue;
      }
      const token = ev.fencing_token ?? fenced.get(ev.payout_id);
      fenced.delete(ev.payout_id);
      const answeredAt = Date.parse(ev.time);
      attempts.push({
        key: accountLockKey(ev.account_id),
        askedAt: answeredAt - (ev.duration_ms ?? 0),
        answeredAt,
        source: e.name,
        token: token ? BigInt(token) : undefined,
        why: ev.why,
      });
    }
  }
  return attempts;
}

/** The grants among executor attempts. */
export function executorGrants(attempts: ExecutorAttempt[]): Grant[] {
  return attempts.flatMap((a) =>
    a.token === undefined ? [] : [{ key: a.key, token: a.token, askedAt: a.askedAt, answeredAt: a.answeredAt, source: a.source }],
  );
}

/**
 * Calls Acquire (no wait) and Release on the accounts' lock keys in a loop, as an executor would,
 * recording both ends of every call. The keys are the executors' own, so its grants interleave
 * with theirs in the order check; each lease is released at once (or lapses after ttlMs).
 */
export class LockProber {
  readonly calls: ProbeCall[] = [];
  private stopped = false;
  private loops: Array<Promise<void>> = [];

  constructor(
    private readonly drill: DrillMesh,
    private readonly keys: string[],
    private readonly rng: Rng,
    private readonly opts: { ttlMs: number; callTimeoutMs: number; pauseMs: number },
  ) {}

  start(concurrency: number): void {
    for (let i = 0; i < concurrency; i++) this.loops.push(this.loop(`drill-prober-${i + 1}`));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  grants(): Grant[] {
    return this.calls
      .filter((c) => c.token !== undefined)
      .map((c) => ({ key: c.key, token: c.token!, askedAt: c.askedAt, answeredAt: c.answeredAt, source: "prober" }));
  }

  private async loop(owner: string): Promise<void> {
    const lock = this.drill.mesh.client(LockService, this.drill.mesh.lock!.url, "executor", { timeoutMs: this.opts.callTimeoutMs });
    while (!this.stopped) {
      const key = pick(this.rng, this.keys);
      const askedAt = Date.now();
      try {
        const res = await lock.acquire({ key, owner, ttlMs: this.opts.ttlMs, waitMs: 0 });
        const call: ProbeCall = { key, askedAt, answeredAt: Date.now(), token: res.lease?.fencingToken };
        this.calls.push(call);
        if (res.lease) await lock.release({ key, leaseId: res.lease.leaseId }).catch(() => {});
      } catch (err) {
        this.calls.push({ key, askedAt, answeredAt: Date.now(), refused: errorReason(err) || Code[ConnectError.from(err).code] });
      }
      await new Promise((r) => setTimeout(r, this.opts.pauseMs));
    }
  }
}
