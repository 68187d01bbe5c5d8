/**
 * The etcd lock backend on a real three-member etcd cluster, under payout load (etcd backend
 * only: pg has no quorum to lose; decision 040).
 *
 * Executors pay a steady stream of payouts while a prober calls Acquire/Release on the same
 * account keys and records both ends of every call. Then, in order:
 *   1. the leader is SIGKILLed; a new one is elected; the old one restarts on its data dir;
 *   2. one member (seeded pick, leader or not) is SIGSTOPped for a while, then SIGCONTed;
 *   3. quorum is lost: the leader's two followers go (one SIGSTOPped, one SIGKILLed), the
 *      leader is alone; then both come back and a leader is elected again;
 *   4. a last batch of payouts is created and must be paid.
 *
 * Expectations: every lock grant seen (prober and executors) has a token above every grant of
 * its key answered before it was asked for, and no token repeats (lock-grants.ts); no grant asked
 * for after quorum was lost is answered before it came back, and the prober saw refusals then;
 * the audit finds nothing; every payout ends PAID or FAILED after the reconciler. The order and
 * quorum checks are fed a planted bad grant each run and must flag it, so they can fail
 * (quorum-checks.ts).
 *
 * The negative control (`fork`) skips steps 1-2 and, while quorum is lost, points the lock service
 * at a copy of the killed member started alone with --force-new-cluster (the split an operator
 * makes by "recovering" a minority member), then back at the cluster. The copy's revisions repeat
 * the cluster's, so the lock hands out tokens that go backwards: the order check must say so.
 */
import { accountLockKey } from "../../../services/shared/process/token-signature.js";
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import type { EtcdMember } from "../etcd-cluster.js";
import { DrillMesh } from "./drill-mesh.js";
import { executorAttempts, LockProber } from "./lock-grants.js";
import { checkLock, LOCK_TOKEN_ORDER } from "./quorum-checks.js";
import { pick, type Rng } from "./rng.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

/** How long each fault lasts under load. */
const LEADERLESS_LOAD_MS = 1500;
const ISOLATION_MS = 2500;
const QUORUM_LOSS_MS = 6000;
/** The control's split lasts until the copy has granted this many leases to the prober (at most FORK_WINDOW_MS). */
const FORK_GRANTS = 10;
const FORK_WINDOW_MS = 15_000;
/** Roughly how long the fault schedule runs; the load generator spreads the payouts over it. */
const SCHEDULE_MS = 20_000;

/** Creates payouts in small batches until stopped, so every fault lands on a busy mesh. */
class SteadyLoad {
  created = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly drill: DrillMesh,
    private readonly accounts: string[],
    private readonly rng: Rng,
    private readonly perBatch: number,
  ) {}

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        // A failed batch (an API hiccup) is not the drill's subject: the next one tries again.
        this.created += await this.drill.createPayouts(this.perBatch, this.accounts, this.rng).then(
          (ids) => ids.length,
          () => 0,
        );
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function timed(fn: () => Promise<void>): Promise<number> {
  const started = Date.now();
  await fn();
  return Date.now() - started;
}

/**
 * Restarts the lock service (same port), again if it exits at start: it reads etcd once on start
 * and exits when that read misses its deadline, as on a loaded machine; Kubernetes restarts it.
 */
async function restartLock(drill: DrillMesh, env: Record<string, string> = {}): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await drill.mesh.lock!.restart(env);
      return;
    } catch (err) {
      if (attempt >= 3) throw err;
    }
  }
}

export interface EtcdQuorumOptions {
  name: string;
  summary: string;
  /** Negative control: the lock service follows a forked lone member while quorum is lost. */
  fork?: boolean;
}

export function etcdQuorum(o: EtcdQuorumOptions): Scenario {
  return {
    name: o.name,
    summary: o.summary,
    backends: ["etcd"],
    expectsCorruption: o.fork,
    caughtBy: o.fork ? LOCK_TOKEN_ORDER : undefined,
    run: (p) => runQuorumDrill(o, p),
  };
}

async function runQuorumDrill(o: EtcdQuorumOptions, p: DrillParams) {
  const total = p.payouts ?? 300;
  const accounts = Array.from({ length: 8 }, (_, i) => `acc-${i + 1}`);
  const notes: string[] = [];
  const failures: string[] = [];
  const drill = await DrillMesh.start({ lockBackend: "etcd", etcdMembers: 3, proxies: 2, postgresUrl: p.postgresUrl, log: p.log });
  const cluster = drill.etcdCluster!;
  const say = (line: string) => {
    notes.push(line);
    p.log(`[drill] ${line}`);
  };
  const prober = new LockProber(drill, accounts.map(accountLockKey), p.rng, { ttlMs: 2000, callTimeoutMs: 4000, pauseMs: 40 });
  const load = new SteadyLoad(drill, accounts, p.rng, Math.max(1, Math.round(total / (SCHEDULE_MS / 500))));
  const leaders = cluster.watchLeaders();
  try {
    // A little rail latency keeps attempts in flight (and leases held) when the faults land.
    await drill.setFaults([{ kind: FaultKind.LATENCY, latencyMs: 30, count: 0, clientReferencePrefix: "" }]);
    for (let i = 0; i < 3; i++) await drill.addExecutor({ EXECUTOR_CONCURRENCY: "3", LEASE_TTL_MS: "3000" });
    load.start();
    prober.start(4);
    await sleep(1500);

    if (!o.fork) {
      // 1. The leader dies; the survivors elect another; it comes back on its data dir.
      const { leader: first } = await cluster.waitLeader(10_000);
      await cluster.kill(first);
      const elected = await cluster.waitLeader(15_000, first);
      say(`SIGKILLed leader ${first.name} (the leader every member's status names); ${elected.leader.name} elected after ${elected.ms} ms`);
      await sleep(LEADERLESS_LOAD_MS);
      const rejoin = await timed(async () => {
        cluster.restart(first);
        await cluster.waitHealthy(30_000);
      });
      say(`${first.name} restarted on its data dir and rejoined in ${rejoin} ms`);

      // 2. One member hangs (SIGSTOP): its peers stop hearing from it, its clients get no answer.
      const isolated = pick(p.rng, cluster.members);
      const wasLeader = isolated === (await cluster.leader());
      isolated.pause();
      await sleep(ISOLATION_MS);
      isolated.resume();
      const healed = await timed(() => cluster.waitHealthy(30_000));
      say(`SIGSTOPped ${isolated.name}${wasLeader ? " (the leader)" : ""} for ${ISOLATION_MS} ms; healthy ${healed} ms after SIGCONT`);
    }

    // 3. Quorum lost: the leader is left alone (the case where a member may still believe it leads).
    const { leader: alone } = await cluster.waitLeader(10_000);
    const [stopped, killed] = cluster.members.filter((m) => m !== alone) as [EtcdMember, EtcdMember];
    stopped.pause();
    await cluster.kill(killed);
    const lostAt = Date.now();
    if (o.fork) {
      // The copy's WAL still names the old peers, and it dials them until it has dropped them: a
      // lone leader that answered could take the copy for its returning member. Stopped, it cannot.
      alone.pause();
      const fork = await cluster.forkAlone(killed, p.log);
      await restartLock(drill, { ETCD_ENDPOINTS: fork.endpoint });
      say(`the lock service now uses ${fork.name}, a copy of ${killed.name} started alone with --force-new-cluster`);
      // Until the copy has granted a few leases (or a bound): the control must exercise the split.
      const from = prober.calls.length;
      const until = Date.now() + FORK_WINDOW_MS;
      while (prober.calls.slice(from).filter((c) => c.token !== undefined).length < FORK_GRANTS && Date.now() < until) await sleep(100);
      await fork.signal("SIGKILL");
    } else {
      await sleep(QUORUM_LOSS_MS);
    }
    const backAt = Date.now();
    const regained = await timed(async () => {
      cluster.restart(killed);
      stopped.resume();
      alone.resume();
      await cluster.waitHealthy(30_000);
    });
    // The control's lock service goes back to the configured endpoints (it reads the floor on start: after the heal).
    if (o.fork) await restartLock(drill);
    const healedAt = Date.now();
    const aloneWas = o.fork ? "SIGSTOPped too while the copy ran" : "alone";
    say(
      `quorum lost for ${backAt - lostAt} ms (${stopped.name} SIGSTOPped, ${killed.name} SIGKILLed, ${alone.name} ${aloneWas}); healthy ${regained} ms after both came back`,
    );

    // 4. Payouts resume: a last batch, created after quorum came back, must be paid.
    await sleep(500);
    await load.stop();
    const after = await drill.createPayouts(Math.max(5, Math.round(total / 10)), accounts, p.rng);
    const created = load.created + after.length;
    // The control's tokens went backwards: the fences park payouts, so it does not wait long.
    const open = await drill.waitSettled(o.fork ? 10_000 : 90_000);
    if (open !== 0) failures.push(`${open} payouts did not settle`);
    await prober.stop();
    for (const e of drill.mesh.executors) await e.stop();
    const seen = await leaders.stop();
    const elections = Math.max(0, seen.changes.length - 1);
    say(`leaders seen: ${seen.changes.join(" -> ")} (elections seen: ${elections}; raft term ${seen.firstTerm} -> ${seen.lastTerm})`);

    const lock = checkLock(prober.calls, executorAttempts(drill), { lostAt, backAt, healedAt });
    for (const n of lock.notes) say(n);
    const afterStates = await drill.query<{ state: string; n: number }>(
      "SELECT state, count(*)::int AS n FROM payouts WHERE payout_id = ANY($1) GROUP BY state",
      [after],
    );
    const paidAfter = afterStates.find((s) => s.state === "PAID")?.n ?? 0;
    say(`after quorum came back: ${afterStates.map((s) => `${s.n} ${s.state}`).join(", ")} of ${after.length} new payouts`);
    if (paidAfter === 0) failures.push("no payout created after quorum came back was paid");

    const rec = await drill.reconcile();
    if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}`);
    // The control leaves payouts parked on purpose: only the money invariants are judged there.
    const result = await drill.check(!o.fork);
    const states = await drill.query<{ state: string; n: number }>("SELECT state, count(*)::int AS n FROM payouts GROUP BY state ORDER BY state");
    say(`${created} payouts: ${states.map((s) => `${s.n} ${s.state}`).join(", ")}`);
    const unfinished = states.filter((s) => s.state !== "PAID" && s.state !== "FAILED").reduce((a, s) => a + s.n, 0);
    if (unfinished > 0) failures.push(`${unfinished} payouts ended neither PAID nor FAILED`);
    const violations = [...result.violations, ...lock.violations];
    const counts = {
      ...result.counts,
      ...lock.counts,
      payoutsCreated: created,
      probeCalls: prober.calls.length,
      elections,
      raftTerms: seen.lastTerm - seen.firstTerm,
    };
    if (o.fork) {
      // Caught means the lock's own check flagged it, and the fences still kept the money safe.
      const caught = lock.violations.some((v) => v.invariant === LOCK_TOKEN_ORDER);
      const moneyViolations = result.violations.length;
      say(`control: ${lock.counts.tokenOrderViolations} token order violations flagged; ${moneyViolations} money invariant violations`);
      return {
        verdict: caught && moneyViolations === 0 ? ("CORRUPTION_DETECTED" as const) : ("FAIL" as const),
        violations,
        counts,
        failures: caught
          ? moneyViolations === 0
            ? []
            : ["the fences let a backwards token move money"]
          : ["the lock handed out tokens from a split member but the order check found nothing"],
        notes,
      };
    }
    failures.push(...lock.failures);
    return { verdict: guardedVerdict(violations, failures), violations, counts, failures, notes };
  } finally {
    await leaders.stop().catch(() => {});
    await load.stop().catch(() => {});
    await prober.stop().catch(() => {});
    await drill.stop();
  }
}
