/**
 * The soak drill's nemesis: every fault railfence claims to survive, on one seeded schedule.
 * Each kind runs in its own loop, so faults overlap the way they do in production; every event is
 * recorded with its time, target and what happened.
 *
 *   proxy-kill      SIGKILL a rail-proxy (preferably one with calls in flight), restart it
 *   paused-holder   SIGSTOP an executor past its lease, then SIGCONT it
 *   proxy-stall     freeze a replica of its own between admission and forward for longer than the ambiguity
 *                   threshold, while the sweeper and a reconciler run close the intent NOT_PAID
 *   paydb-crash     crash paydb (immediate shutdown) and start it again
 *   lock-outage     stop the lock backend (lockdb or etcd) for a while
 *   executor-kill   SIGKILL an executor and start a replacement
 *   rail-fault      answers lost after booking, hangs, refusals, slow answers (past the deadline)
 *   rogue-submit    a compromised executor pays a made-up payout to its own beneficiary
 *   rogue-resubmit  a compromised executor re-fences a payout that was submitted and submits it
 *                   again under a fresh reference
 *
 * Two kinds are aimed, not random: each makes the one interleaving that only one guard stops, so
 * that removing that guard (the soak's negative controls) lets a violation through for the audit
 * to find. Random faults alone rarely land there (a pause right between fence and submit; a
 * second submission while the first is live).
 *   stale-holder    a holder fences its payout, stops past its lease (no renewal, no release)
 *                   while the next holder pays another payout of the account, then submits with
 *                   its stale token: only the high-water mark stands (FENCE_ADVANCED without it)
 *   rogue-double    a compromised executor submits a payout, re-fences it under a newer token and
 *                   submits it again under the other reference shape: only the one-live guard
 *                   stands (a double payment, INV-02, without it)
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { LockService } from "../../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { RailProxyService, SubmissionState } from "../../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { errorReason } from "../../../services/shared/domain/errors.js";
import { accountLockKey } from "../../../services/shared/process/token-signature.js";
import { serviceUrl } from "../database-roles.js";
import type { ServiceProcess } from "../service-process.js";
import type { DrillMesh } from "./drill-mesh.js";
import type { Rng } from "./rng.js";

export type NemesisKind =
  | "proxy-kill"
  | "paused-holder"
  | "proxy-stall"
  | "paydb-crash"
  | "lock-outage"
  | "executor-kill"
  | "rail-fault"
  | "rogue-submit"
  | "rogue-resubmit"
  | "stale-holder"
  | "rogue-double";

export interface NemesisEvent {
  at: string;
  /** Seconds since the soak started. */
  t: number;
  kind: NemesisKind;
  target: string;
  detail: string;
}

/** How often each kind strikes (mean seconds between events) and the least it must strike. */
export interface NemesisPlan {
  everySeconds: Record<NemesisKind, number>;
  atLeast: Partial<Record<NemesisKind, number>>;
}

export interface NemesisDeps {
  drill: DrillMesh;
  rng: Rng;
  log: (line: string) => void;
  /** Replaces a killed executor. */
  addExecutor: () => Promise<ServiceProcess>;
  leaseTtlMs: number;
  /** RAIL_DEADLINE_MS + AMBIGUITY_MARGIN_MS of the proxies: past it the sweeper may sweep. */
  ambiguityMs: number;
  /** Past this, a reconciler run may close an intent absent from the statement as NOT_PAID. */
  settleMs: number;
  /** Hot accounts (stalls block one of these). */
  hotAccounts: string[];
  /**
   * Runs the reconciler once (a stall closes its intent NOT_PAID before the proxy resumes), through
   * every proxy but `avoid`: the frozen one would hold its statement read until the deadline.
   */
  reconcile: (avoid?: string) => Promise<{ code: number | null; lines: string[] }>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Nemesis {
  readonly events: NemesisEvent[] = [];
  /** Strikes that could not be carried out (a target was down): logged, not counted. */
  readonly misses: NemesisEvent[] = [];
  private stopping = false;
  private readonly started = Date.now();
  private loops: Promise<void>[] = [];
  private readonly owner: pg.Pool;
  private readonly executorDb: pg.Pool;
  /** Mutual exclusion for faults that must not overlap (paydb down while stalling, ...). */
  private exclusive: Promise<void> = Promise.resolve();

  constructor(private readonly d: NemesisDeps) {
    this.owner = new pg.Pool({ connectionString: d.drill.paydbUrl, max: 3 });
    this.owner.on("error", () => {});
    // A compromised executor has the executor's database role, no more.
    this.executorDb = new pg.Pool({ connectionString: serviceUrl(d.drill.paydbUrl, "executor"), max: 2 });
    this.executorDb.on("error", () => {});
  }

  private record(kind: NemesisKind, target: string, detail: string): void {
    const e = { at: new Date().toISOString(), t: Math.round((Date.now() - this.started) / 100) / 10, kind, target, detail };
    this.events.push(e);
    this.d.log(`[nemesis +${e.t}s] ${kind} ${target}: ${detail}`);
  }

  private miss(kind: NemesisKind, detail: string): void {
    const e = { at: new Date().toISOString(), t: Math.round((Date.now() - this.started) / 100) / 10, kind, target: "-", detail };
    this.misses.push(e);
    this.d.log(`[nemesis +${e.t}s] ${kind} missed: ${detail}`);
  }

  count(kind: NemesisKind): number {
    return this.events.filter((e) => e.kind === kind).length;
  }

  /** Runs fn alone among the exclusive faults. */
  private alone<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.exclusive.then(fn);
    this.exclusive = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  start(plan: NemesisPlan): void {
    for (const [kind, every] of Object.entries(plan.everySeconds) as Array<[NemesisKind, number]>) {
      if (every <= 0) continue;
      this.loops.push(
        (async () => {
          // Spread the first strikes so the kinds do not all fire at t=0 (all within half a period).
          await sleep(this.d.rng() * every * 500);
          while (!this.stopping) {
            try {
              await this.strike(kind);
            } catch (err) {
              this.miss(kind, `failed: ${err instanceof Error ? err.message : String(err)}`);
            }
            // Exponential-ish spacing around the mean, seeded.
            await sleep(every * 1000 * (0.5 + this.d.rng()));
          }
        })(),
      );
    }
  }

  private stopped = false;

  /**
   * Strikes, one kind at a time, every kind still below its minimum (a strike can miss its target
   * on a busy machine: no admission queued for a stall, a proxy down for a rogue), until each
   * reached it or `withinMs` passed.
   */
  async topUp(atLeast: Partial<Record<NemesisKind, number>>, withinMs: number): Promise<void> {
    const deadline = Date.now() + withinMs;
    for (const [kind, need] of Object.entries(atLeast) as Array<[NemesisKind, number]>) {
      while (this.count(kind) < need && Date.now() < deadline) {
        try {
          await this.strike(kind);
        } catch (err) {
          this.miss(kind, `failed: ${err instanceof Error ? err.message : String(err)}`);
          await sleep(500);
        }
      }
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.stopping = true;
    await Promise.all(this.loops);
    await this.exclusive;
    for (const p of this.d.drill.mesh.executors) p.resume();
    for (const p of this.d.drill.mesh.proxies) p.resume();
    this.stallProxy?.resume();
    await this.stallProxy?.stop(5000);
    await this.owner.end();
    await this.executorDb.end();
  }

  /**
   * A pod's restart policy: start the process again until it is up. A single restart can fail
   * when another fault overlaps (paydb crashed: the proxy's start-up check exits), and a proxy
   * left down for good would end the run with none to read the statement through.
   */
  private readonly restarting = new Set<object>();
  /** Proxies a stall holds SIGSTOPped between admission and forward. */
  private readonly frozen = new Set<object>();

  private async restartUntilUp(proc: { running: boolean; name: string; restart(): Promise<unknown> }, withinMs = 120_000): Promise<void> {
    this.restarting.add(proc);
    try {
      await this.restartLoop(proc, withinMs);
    } finally {
      this.restarting.delete(proc);
    }
  }

  private async restartLoop(proc: { running: boolean; name: string; restart(): Promise<unknown> }, withinMs: number): Promise<void> {
    const deadline = Date.now() + withinMs;
    for (let attempt = 1; ; attempt++) {
      try {
        await proc.restart();
        if (proc.running) return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(`${proc.name} did not come back after ${attempt} restarts: ${err instanceof Error ? err.message : String(err)}`);
        this.d.log(`[nemesis] ${proc.name} restart ${attempt} failed (${err instanceof Error ? err.message : String(err)}); again`);
      }
      if (Date.now() > deadline) throw new Error(`${proc.name} did not come back after ${attempt} restarts`);
      await sleep(Math.min(5000, 250 * 2 ** attempt));
    }
  }

  /** After the run: every rail-proxy up again (as its Deployment would have it), before settling and the audit. */
  async restoreProxies(): Promise<void> {
    for (const p of this.d.drill.mesh.proxies) if (!p.running) await this.restartUntilUp(p);
  }

  private pick<T>(list: readonly T[]): T | undefined {
    return list.length ? list[Math.floor(this.d.rng() * list.length)] : undefined;
  }

  private async strike(kind: NemesisKind): Promise<void> {
    const { drill } = this.d;
    switch (kind) {
      case "proxy-kill": {
        const forwarding = await drill
          .query<{ replica_id: string; n: number }>(
            "SELECT replica_id, count(*)::int AS n FROM rail_submissions WHERE state = 'FORWARDING' GROUP BY replica_id",
          )
          .catch(() => []);
        // Never one that is still coming back from an earlier kill: that would kill a start-up, not a
        // replica. Never one a stall froze either: it has an intent in flight, so it would be the
        // favourite victim, and killing it would end the stall before the forward it is there for.
        const up = drill.mesh.proxies.filter((x) => x.running && !this.restarting.has(x) && !this.frozen.has(x));
        const busy = up.filter((x) => forwarding.some((f) => f.replica_id === x.opts.env.REPLICA_ID && f.n > 0));
        const victim = this.pick(busy.length > 0 && this.d.rng() < 0.8 ? busy : up);
        if (!victim) return;
        const inFlight = forwarding.find((f) => f.replica_id === victim.opts.env.REPLICA_ID)?.n ?? 0;
        victim.kill("SIGKILL");
        this.record(kind, victim.name, `${inFlight} calls in flight`);
        await sleep(100 + this.d.rng() * 300);
        await this.restartUntilUp(victim);
        return;
      }
      case "paused-holder": {
        const victim = this.pick(drill.mesh.executors.filter((x) => x.running));
        if (!victim) return;
        const ms = Math.round(this.d.leaseTtlMs + 300 + this.d.rng() * 1500);
        victim.pause();
        this.record(kind, victim.name, `SIGSTOP for ${ms} ms (lease ${this.d.leaseTtlMs} ms)`);
        await sleep(ms);
        victim.resume();
        return;
      }
      case "executor-kill": {
        const victim = this.pick(drill.mesh.executors.filter((x) => x.running));
        if (!victim) return;
        victim.kill("SIGKILL");
        const next = await this.d.addExecutor();
        this.record(kind, victim.name, `SIGKILL; replaced by ${next.name}`);
        return;
      }
      case "rail-fault": {
        // The last two book the payment and answer with a status the rail protocol does not
        // document (unset, or one this build does not know): ambiguity, never "not paid".
        const kinds = [
          FaultKind.LAND_THEN_LOSE_ANSWER,
          FaultKind.NEVER_LAND_HANG,
          FaultKind.REJECT,
          FaultKind.LATENCY,
          FaultKind.LAND_THEN_ANSWER_STATUS_UNSET,
          FaultKind.LAND_THEN_ANSWER_STATUS_UNKNOWN,
        ];
        const fault = kinds[Math.floor(this.d.rng() * kinds.length)]!;
        const count = 1 + Math.floor(this.d.rng() * 4);
        // LATENCY past the proxies' deadline: the rail books after the proxy gave up (a late booking).
        const latencyMs = fault === FaultKind.LATENCY ? 1500 : 0;
        await drill.setFaults([{ kind: fault, latencyMs, count, clientReferencePrefix: "" }, ...BASELINE_FAULTS]);
        this.record(kind, "rail", `${FaultKind[fault]} x${count}${latencyMs ? ` (${latencyMs} ms)` : ""}`);
        return;
      }
      case "paydb-crash":
        return this.alone(async () => {
          const down = 1000 + Math.round(this.d.rng() * 1500);
          await drill.servers.paydb!.stop("immediate");
          this.record(kind, "paydb", `immediate shutdown for ${down} ms`);
          await sleep(down);
          await drill.servers.paydb!.startProcess();
        });
      case "lock-outage":
        return this.alone(async () => {
          const down = 1500 + Math.round(this.d.rng() * 2000);
          if (drill.etcd) await drill.etcd.stop();
          else await drill.servers.lockdb!.stop("immediate");
          this.record(kind, drill.etcd ? "etcd" : "lockdb", `down for ${down} ms`);
          await sleep(down);
          if (drill.etcd) await drill.etcd.restart();
          else await drill.servers.lockdb!.startProcess();
        });
      case "proxy-stall":
        return this.alone(() => this.stall());
      case "rogue-submit":
        return this.rogueSubmit();
      case "rogue-resubmit":
        return this.rogueResubmit();
      case "stale-holder":
        return this.staleHolder();
      case "rogue-double":
        return this.rogueDouble();
    }
  }

  /**
   * A proxy frozen between admission and forward, aimed at the pre-forward budget: a replica of
   * its own (no executor knows it, so the held admission is its only call) admits a payout the
   * nemesis fenced as an executor does; its admission waits on the account's mark row, which the
   * nemesis holds; the proxy is SIGSTOPped, the row released (the intent commits FORWARDING), the
   * sweeper makes it ambiguous and a reconciler run closes it NOT_PAID; then the proxy resumes
   * and must not forward (PAID_DESPITE_NOT_PAID without the budget).
   *
   * Why a replica of its own: a busy replica frozen at a random instant also freezes calls that
   * passed the budget check and whose bytes had not left the process (the residual window,
   * docs/threat-model.md). That window is real, and detected, not guarded; it has its own test
   * (test/money-safety/stall-then-pay.test.ts) instead of landing in the soak by chance.
   */
  private stallProxy: ServiceProcess | undefined;

  private async stall(): Promise<void> {
    const { drill } = this.d;
    // Early on no hot account may have a mark yet: wait for the first admission.
    let account: string | undefined;
    for (let i = 0; i < 50 && !account; i++) {
      const marked = await drill
        .query<{ account_id: string }>("SELECT account_id FROM rail_high_water WHERE account_id = ANY($1)", [this.d.hotAccounts])
        .catch(() => []);
      account = this.pick(marked.map((m) => m.account_id));
      if (!account) await sleep(200);
    }
    if (!account) return this.miss("proxy-stall", "no hot account has a mark yet");
    if (!this.stallProxy) this.stallProxy = await drill.mesh.startSpareProxy("rail-proxy-stall");
    const proxy = this.stallProxy;
    if (!proxy.running) await this.restartUntilUp(proxy);
    if (!drill.mesh.lock) return this.miss("proxy-stall", "no lock service");
    const c = { proxy: drill.mesh.client(RailProxyService, proxy.url, "executor"), lock: drill.mesh.client(LockService, drill.mesh.lock.url, "executor") };
    const payoutId = await this.claimedNewPayout(account, "stall");
    if (!payoutId) return this.miss("proxy-stall", `paydb refused a new payout of ${account}`);
    try {
      const lease = await this.rogueLease(c, account, "stall", this.d.leaseTtlMs);
      let leaseHeld = true;
      const release = async () => {
        if (!leaseHeld) return;
        leaseHeld = false;
        await c.lock.release({ key: accountLockKey(account), leaseId: lease.leaseId }, { timeoutMs: 5000 }).catch(() => {});
      };
      try {
        if (!(await this.fenceAs(payoutId, lease))) return this.miss("proxy-stall", `could not fence ${payoutId}`);
        const payout = await this.payoutRow(payoutId);
        const ref = `${payoutId}:t${lease.fencingToken}`;
        const stallMs = Math.max(this.d.ambiguityMs, this.d.settleMs) + 500;
        const blocker = await this.owner.connect();
        let answer: Promise<string | undefined> | undefined;
        let frozenAt = 0;
        try {
          await blocker.query("BEGIN");
          await blocker.query("SELECT 1 FROM rail_high_water WHERE account_id = $1 FOR UPDATE", [account]);
          answer = this.submitAs(c, payout, ref, lease, stallMs + 30_000);
          // Wait (briefly) for its admission to queue behind the held row.
          let queued = false;
          for (let i = 0; i < 100 && !queued; i++) {
            const { rows } = await this.owner.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = $1", [
              `rail-proxy/${proxy.opts.env.REPLICA_ID}`,
            ]);
            queued = rows.length > 0;
            if (!queued) await sleep(50);
          }
          if (queued) {
            this.frozen.add(proxy);
            proxy.pause();
            frozenAt = Date.now();
          }
          await blocker.query("COMMIT");
        } catch (err) {
          // paydb went away mid-strike: never leave the proxy frozen.
          proxy.resume();
          this.frozen.delete(proxy);
          throw err;
        } finally {
          blocker.release();
        }
        if (!frozenAt) {
          await answer;
          return this.miss("proxy-stall", "no admission queued on the held mark within 5 s");
        }
        // The honest executors may carry on with the account meanwhile (the proxy checks marks, not leases).
        await release();
        const state = () =>
          this.owner
            .query<{ state: string; late: string | null }>("SELECT state, late_answer_state AS late FROM rail_submissions WHERE payout_id = $1", [ref])
            .then(
              (r) => (r.rows[0] ? `${r.rows[0].state}${r.rows[0].late ? ` (late answer ${r.rows[0].late})` : ""}` : "no intent"),
              () => "unknown (paydb did not answer)",
            );
        let reconciled = "";
        let before = "";
        try {
          await sleep(stallMs);
          // The strike is for the moment after the verdict: the proxy stays frozen until the
          // reconciler has closed the intent NOT_PAID. A run can end without it (a proxy kill cut
          // its statement read, the intent not yet old enough on a loaded machine): run it again,
          // as its CronJob would.
          for (let attempt = 1; attempt <= 6; attempt++) {
            const rec = await this.d.reconcile(proxy.url);
            reconciled =
              rec.code === 0
                ? `reconciled${attempt > 1 ? ` (run ${attempt})` : ""}`
                : `reconciler exited ${rec.code}: ${rec.lines.slice(-3).join(" | ").slice(0, 400)}`;
            before = await state();
            if (before.startsWith("RESOLVED_NOT_PAID")) break;
            await sleep(1000);
          }
        } finally {
          proxy.resume();
          this.frozen.delete(proxy);
        }
        const frozenMs = Date.now() - frozenAt;
        const answered = (await answer) ?? "no answer";
        await sleep(500);
        const detail = `${ref} frozen ${frozenMs} ms between admission and forward; ${reconciled}; intent before it resumed: ${before}; its answer: ${answered}; after: ${await state()}`;
        // Counted only when the verdict landed first: otherwise the strike never reached the window
        // the forward budget is for, and a soak could pass (or its control fail) without testing it.
        if (!before.startsWith("RESOLVED_NOT_PAID")) return this.miss("proxy-stall", `no verdict before the proxy resumed: ${detail}`);
        this.record("proxy-stall", proxy.name, detail);
      } finally {
        await release();
      }
    } finally {
      await this.unclaim(payoutId);
    }
  }

  private proxyAs() {
    const { drill } = this.d;
    const proxy = drill.mesh.proxies.find((p) => p.running && !this.frozen.has(p) && !this.restarting.has(p));
    if (!proxy || !drill.mesh.lock) return undefined;
    return {
      proxy: drill.mesh.client(RailProxyService, proxy.url, "executor"),
      lock: drill.mesh.client(LockService, drill.mesh.lock.url, "executor"),
    };
  }

  /** A real lease for the rogue: it waits for the account like any executor (a few tries). */
  private async rogueLease(c: NonNullable<ReturnType<Nemesis["proxyAs"]>>, account: string, owner = "rogue", ttlMs = 2000) {
    let last: unknown;
    for (let i = 0; i < 5; i++) {
      try {
        return (await c.lock.acquire({ key: accountLockKey(account), owner, ttlMs, waitMs: 3000 }, { timeoutMs: 6000 })).lease!;
      } catch (err) {
        last = err;
        await sleep(200);
      }
    }
    throw last;
  }

  /** A compromised executor takes a real token and pays a payout that does not exist, to itself. */
  private async rogueSubmit(): Promise<void> {
    const c = this.proxyAs();
    if (!c) return;
    const account = this.pick(this.d.hotAccounts)!;
    const lease = await this.rogueLease(c, account);
    try {
      const payoutId = `po_rogue_${randomUUID().slice(0, 8)}`;
      const answer = await c.proxy
        .submitPayout(
          {
            accountId: account,
            payoutId,
            fencingToken: lease.fencingToken,
            fencingTokenSignature: lease.tokenSignature,
            amount: { amountMinor: 999_999_900n, currency: "EUR" },
            beneficiary: "ben-rogue",
          },
          { timeoutMs: 5000 },
        )
        .then(
          (r) => ({ paid: r.submission?.state === SubmissionState.ACCEPTED, text: `ADMITTED (${r.submission?.railReference || "no reference"})` }),
          (err: unknown) => ({ paid: false, refused: errorReason(err), text: errorReason(err) || String(err) }),
        );
      // A strike counts when the binding refused it, or when it was paid (what the control's
      // audit must then find). Anything else (a rail fault or an outage at the same moment) gave
      // the guard nothing to stop and the audit nothing to find: a miss, so the soak strikes again.
      const refusedByBinding = "refused" in answer && (answer.refused === "BOUND_PAYOUT_NOT_FOUND" || answer.refused === "PAYOUT_MISMATCH");
      if (!answer.paid && !refusedByBinding) return this.miss("rogue-submit", `made-up ${payoutId} neither refused nor paid: ${answer.text}`);
      this.record("rogue-submit", account, `made-up ${payoutId} for 999,999,900 to ben-rogue: ${answer.text}`);
    } finally {
      await c.lock.release({ key: accountLockKey(account), leaseId: lease.leaseId }, { timeoutMs: 5000 }).catch(() => {});
    }
  }

  /**
   * A compromised executor re-fences (with its database role) a payout that already has an
   * accepted or ambiguous submission, and submits it again under a fresh reference.
   */
  private async rogueResubmit(): Promise<void> {
    const c = this.proxyAs();
    if (!c) return;
    // A payout being paid (a submission in flight or ambiguous) — or, failing that, a finished one,
    // which the payouts guard must refuse to reopen.
    const pick = (where: string) =>
      this.d.drill.query<{ payout_id: string; account_id: string; amount_minor: string; currency: string; beneficiary: string; state: string }>(
        `SELECT p.payout_id, p.account_id, p.amount_minor::text, p.currency, p.beneficiary, p.state FROM payouts p
          WHERE ${where} AND EXISTS (SELECT 1 FROM rail_submissions s WHERE s.bound_payout_id = p.payout_id AND s.state IN ('FORWARDING', 'TIMEOUT', 'ACCEPTED'))
          ORDER BY random() LIMIT 1`,
      );
    let processing: Awaited<ReturnType<typeof pick>> = [];
    for (let i = 0; i < 10 && processing.length === 0; i++) {
      processing = await pick("p.state = 'PROCESSING'");
      if (!processing.length) await sleep(200);
    }
    const [victim] = processing.length ? processing : await pick("p.state = 'PAID'");
    if (!victim) return;
    const lease = await this.rogueLease(c, victim.account_id);
    try {
      const refenced = await this.executorDb
        .query(
          "UPDATE payouts SET state = 'PROCESSING', fence = $2, fence_signature = $3, claimed_by = NULL, claimed_until = NULL WHERE payout_id = $1 AND fence < $2",
          [victim.payout_id, lease.fencingToken.toString(), signatureOf(lease)],
        )
        .then(
          () => undefined,
          (err: unknown) => (err as Error).message,
        );
      if (refenced) {
        this.record("rogue-resubmit", victim.payout_id, `tried to reopen a ${victim.state} payout: refused by paydb (${refenced})`);
        return;
      }
      const ref = `${victim.payout_id}:t${lease.fencingToken}`;
      const answer = (await this.submitAs(c, victim, ref, lease)) ?? "no proxy answered";
      this.record("rogue-resubmit", victim.payout_id, `re-fenced at ${lease.fencingToken} and resubmitted as ${ref}: ${answer}`);
    } finally {
      await c.lock.release({ key: accountLockKey(victim.account_id), leaseId: lease.leaseId }, { timeoutMs: 5000 }).catch(() => {});
    }
  }

  /**
   * A payout of `account` that no honest executor works on: paydb's owner inserts it already
   * claimed for `owner`, in one statement. Since executors are woken by paydb (decision 069) they
   * claim a new payout within milliseconds of its commit; creating it through the Payouts API and
   * claiming it afterwards lost that race most of the time, and on a loaded machine nearly always,
   * so a strike could miss until its negative control had nothing left to catch. Inserted claimed,
   * it is never announced (migration 021's trigger skips a claimed row) and no executor's claim
   * matches it until `unclaim` hands it back; from then on it is an ordinary payout. What the
   * strikes test (the rogue's lease, fence and submission through the proxy) is unchanged.
   * Undefined when paydb refused the insert (it may be crashing this instant).
   */
  private async claimedNewPayout(account: string, owner: string): Promise<string | undefined> {
    const payoutId = `po_nemesis_${randomUUID().replaceAll("-", "").slice(0, 20)}`;
    const amount = 100 + Math.floor(this.d.rng() * 100_000);
    const inserted = await this.owner
      .query(
        `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, idempotency_key, claimed_by, claimed_until)
         VALUES ($1, 'drill-nemesis', $2, $3, 'EUR', $4, $5, $6, now() + interval '10 minutes')`,
        [payoutId, account, amount, `ben-${Math.floor(this.d.rng() * 1000)}`, randomUUID(), owner],
      )
      .then(
        () => true,
        () => false,
      );
    return inserted ? payoutId : undefined;
  }

  /** Hands the payout back to the honest executors (retried: paydb may be crashing this instant). */
  private async unclaim(payoutId: string): Promise<void> {
    for (let i = 0; i < 120; i++) {
      const done = await this.executorDb
        .query("UPDATE payouts SET claimed_by = NULL, claimed_until = NULL WHERE payout_id = $1 AND state IN ('PENDING', 'PROCESSING')", [payoutId])
        .then(
          () => true,
          () => false,
        );
      if (done) return;
      await sleep(500);
    }
    throw new Error(`could not hand ${payoutId} back to the executors`);
  }

  /**
   * Fences the payout under the lease's token with the executor's role, as an executor does
   * before submitting: with the lock's signature, which paydb verifies when tokens are signed
   * (migration 014).
   */
  private async fenceAs(payoutId: string, lease: { fencingToken: bigint; tokenSignature: Uint8Array }): Promise<boolean> {
    const { rowCount } = await this.executorDb.query(
      "UPDATE payouts SET fence = $2, fence_signature = $3, state = 'PROCESSING', updated_at = now() WHERE payout_id = $1 AND fence < $2 AND state IN ('PENDING', 'PROCESSING')",
      [payoutId, lease.fencingToken.toString(), signatureOf(lease)],
    );
    return (rowCount ?? 0) > 0;
  }

  private async payoutRow(payoutId: string) {
    const [row] = await this.d.drill.query<{ account_id: string; amount_minor: string; currency: string; beneficiary: string }>(
      "SELECT account_id, amount_minor::text, currency, beneficiary FROM payouts WHERE payout_id = $1",
      [payoutId],
    );
    if (!row) throw new Error(`payout ${payoutId} not found`);
    return row;
  }

  /** SubmitPayout as an executor sends it: the proxy's answer, or undefined when no proxy answered at all. */
  private async submitAs(
    c: NonNullable<ReturnType<Nemesis["proxyAs"]>>,
    payout: Awaited<ReturnType<Nemesis["payoutRow"]>>,
    reference: string,
    lease: { fencingToken: bigint; tokenSignature: Uint8Array },
    timeoutMs = 5000,
  ): Promise<string | undefined> {
    return c.proxy
      .submitPayout(
        {
          accountId: payout.account_id,
          payoutId: reference,
          fencingToken: lease.fencingToken,
          fencingTokenSignature: lease.tokenSignature,
          amount: { amountMinor: BigInt(payout.amount_minor), currency: payout.currency },
          beneficiary: payout.beneficiary,
        },
        { timeoutMs },
      )
      .then(
        (r) => `ADMITTED (${SubmissionState[r.submission?.state ?? SubmissionState.UNSPECIFIED]})`,
        (err: unknown) => errorReason(err) || undefined,
      );
  }

  /** The account's high-water mark once it is above `token` (the next holder submitted), or undefined after `withinMs`. */
  private async markAbove(account: string, token: bigint, withinMs: number): Promise<bigint | undefined> {
    const deadline = Date.now() + withinMs;
    while (Date.now() < deadline && !this.stopped) {
      const [row] = await this.d.drill.query<{ mark: string }>("SELECT mark::text FROM rail_high_water WHERE account_id = $1", [account]).catch(() => []);
      if (row && BigInt(row.mark) > token) return BigInt(row.mark);
      await sleep(200);
    }
    return undefined;
  }

  /**
   * Aimed at the mark: a holder fences its own payout and stops (no renewal, no release) past its
   * lease; the next holder takes the account with a newer token and pays another payout of it;
   * the stale holder then submits. Its payout is fenced by its own token and has no other
   * submission, so the binding and the one-live guard let it through: only the mark refuses it.
   */
  private async staleHolder(): Promise<void> {
    const c = this.proxyAs();
    if (!c) return;
    const account = this.pick(this.d.hotAccounts)!;
    const payoutId = await this.claimedNewPayout(account, "stale-holder");
    if (!payoutId) return this.miss("stale-holder", `paydb refused a new payout of ${account}`);
    try {
      const lease = await this.rogueLease(c, account, "stale-holder", this.d.leaseTtlMs);
      if (!(await this.fenceAs(payoutId, lease))) return this.miss("stale-holder", `could not fence ${payoutId}`);
      // Stopped: the lease lapses. Another payout of the account, so the next holder has one to pay.
      await this.d.drill.createPayouts(1, [account], this.d.rng);
      const mark = await this.markAbove(account, lease.fencingToken, 60_000);
      if (mark === undefined) return this.miss("stale-holder", `${account}'s mark did not pass ${lease.fencingToken} within 60 s`);
      const answer = await this.submitAs(c, await this.payoutRow(payoutId), `${payoutId}:t${lease.fencingToken}`, lease);
      if (answer === undefined) return this.miss("stale-holder", `no proxy answered ${payoutId}'s stale submission`);
      this.record("stale-holder", payoutId, `fenced at ${lease.fencingToken}, stopped past its lease; mark moved to ${mark}; stale submission: ${answer}`);
    } finally {
      await this.unclaim(payoutId);
    }
  }

  /**
   * Aimed at the one-live guard: a compromised executor submits a payout, takes the account again
   * (a newer token), re-fences the payout to it and submits it under the other reference shape
   * (plain id after `:t<token>`). Mark and binding both let the second one through; only "no
   * other live submission of this payout" refuses it (PAYOUT_ALREADY_SUBMITTED).
   *
   * The rail books the first submission and loses its answer (a fault aimed at that reference):
   * the first stays live and ambiguous, and the payout PROCESSING. An answered ACCEPTED would have
   * closed the payout PAID in the same statement (decision 072), and the binding would then refuse
   * the second before the one-live guard is asked: nothing left for its control to catch.
   */
  private async rogueDouble(): Promise<void> {
    const c = this.proxyAs();
    if (!c) return;
    const account = this.pick(this.d.hotAccounts)!;
    const payoutId = await this.claimedNewPayout(account, "rogue");
    if (!payoutId) return this.miss("rogue-double", `paydb refused a new payout of ${account}`);
    try {
      const payout = await this.payoutRow(payoutId);
      const answers: string[] = [];
      for (const shape of ["attempt", "plain"] as const) {
        const lease = await this.rogueLease(c, account);
        try {
          if (!(await this.fenceAs(payoutId, lease))) return this.miss("rogue-double", `could not fence ${payoutId} at ${lease.fencingToken}`);
          const ref = shape === "attempt" ? `${payoutId}:t${lease.fencingToken}` : payoutId;
          if (shape === "attempt") {
            await this.d.drill.setFaults([{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, count: 1, clientReferencePrefix: ref }, ...BASELINE_FAULTS]);
          }
          const answer = await this.submitAs(c, payout, ref, lease);
          if (answer === undefined) return this.miss("rogue-double", `no proxy answered ${ref}`);
          answers.push(`${ref} at ${lease.fencingToken}: ${answer}`);
          // Only a first submission the rail booked with its answer lost leaves the one-live guard
          // something to refuse: answered (a rail fault strike replaced the aimed one), rejected or
          // not admitted is a miss, so the soak strikes again instead of counting a strike no
          // control could catch.
          if (shape === "attempt" && answer !== "RAIL_AMBIGUOUS") return this.miss("rogue-double", answers.join("; "));
          // Likewise the second: the guard refused it (the strike was caught) or the rail paid it
          // (a double payment the audit must find). Rejected, ambiguous or not forwarded, it left
          // nothing to catch either way: a miss, so that the strike is made again.
          if (shape === "plain" && answer !== "PAYOUT_ALREADY_SUBMITTED" && answer !== "ADMITTED (ACCEPTED)")
            return this.miss("rogue-double", answers.join("; then "));
        } finally {
          await c.lock.release({ key: accountLockKey(account), leaseId: lease.leaseId }, { timeoutMs: 5000 }).catch(() => {});
        }
      }
      this.record("rogue-double", payoutId, answers.join("; then "));
    } finally {
      await this.unclaim(payoutId);
    }
  }
}

/** Always last in the fault plan: a small latency so kills land between commit and answer. */
export const BASELINE_FAULTS = [{ kind: FaultKind.LATENCY, latencyMs: 30, count: 0, clientReferencePrefix: "" }];

/** A lease's signature as paydb stores it (null when the lock does not sign). */
function signatureOf(lease: { tokenSignature: Uint8Array }): Buffer | null {
  return lease.tokenSignature.length ? Buffer.from(lease.tokenSignature) : null;
}
