/**
 * The soak drill's nemesis: every fault railfence claims to survive, on one seeded schedule.
 * Each kind runs in its own loop, so faults overlap the way they do in production; every event is
 * recorded with its time, target and what happened.
 *
 *   proxy-kill      SIGKILL a rail-proxy (preferably one with calls in flight), restart it
 *   paused-holder   SIGSTOP an executor past its lease, then SIGCONT it
 *   proxy-stall     freeze a proxy between admission and forward for longer than the ambiguity
 *                   threshold, while the sweeper and a reconciler run close the intent NOT_PAID
 *   paydb-crash     crash paydb (immediate shutdown) and start it again
 *   lock-outage     stop the lock backend (lockdb or etcd) for a while
 *   executor-kill   SIGKILL an executor and start a replacement
 *   rail-fault      answers lost after booking, hangs, refusals, slow answers (past the deadline)
 *   rogue-submit    a compromised executor pays a made-up payout to its own beneficiary
 *   rogue-resubmit  a compromised executor re-fences a payout that was submitted and submits it
 *                   again under a fresh reference
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { LockService } from "../../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { RailProxyService } from "../../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { errorReason } from "../../../services/shared/errors.js";
import { accountLockKey } from "../../../services/shared/token-signature.js";
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
  | "rogue-resubmit";

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
  /** Runs the reconciler once (a stall closes its intent NOT_PAID before the proxy resumes). */
  reconcile: () => Promise<unknown>;
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
    await this.owner.end();
    await this.executorDb.end();
  }

  private pick<T>(list: readonly T[]): T | undefined {
    return list.length ? list[Math.floor(this.d.rng() * list.length)] : undefined;
  }

  private async strike(kind: NemesisKind): Promise<void> {
    const { drill } = this.d;
    switch (kind) {
      case "proxy-kill": {
        const forwarding = await drill.query<{ replica_id: string; n: number }>("SELECT replica_id, count(*)::int AS n FROM rail_submissions WHERE state = 'FORWARDING' GROUP BY replica_id").catch(() => []);
        const busy = drill.mesh.proxies.filter((x) => x.running && forwarding.some((f) => f.replica_id === x.opts.env.REPLICA_ID && f.n > 0));
        const victim = this.pick(busy.length > 0 && this.d.rng() < 0.8 ? busy : drill.mesh.proxies.filter((x) => x.running));
        if (!victim) return;
        const inFlight = forwarding.find((f) => f.replica_id === victim.opts.env.REPLICA_ID)?.n ?? 0;
        victim.kill("SIGKILL");
        this.record(kind, victim.name, `${inFlight} calls in flight`);
        await sleep(100 + this.d.rng() * 300);
        await victim.restart();
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
        const kinds = [FaultKind.LAND_THEN_LOSE_ANSWER, FaultKind.NEVER_LAND_HANG, FaultKind.REJECT, FaultKind.LATENCY];
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
    }
  }

  /**
   * A proxy frozen between admission and forward: its admission is held on the account's mark
   * row, the proxy is SIGSTOPped, the row released (the intent commits as FORWARDING), the sweeper
   * makes it ambiguous and a reconciler run closes it NOT_PAID; then the proxy resumes.
   */
  private async stall(): Promise<void> {
    const { drill } = this.d;
    // Hold every hot account's mark: the next admission on any of them queues behind it.
    const accounts = this.d.hotAccounts;
    // Early on no hot account may have a mark yet: wait for the first admission.
    for (let i = 0; i < 50; i++) {
      const [marked] = await this.d.drill.query<{ n: number }>("SELECT count(*)::int AS n FROM rail_high_water WHERE account_id = ANY($1)", [accounts]).catch(() => [{ n: 0 }]);
      if (marked && marked.n > 0) break;
      await sleep(200);
    }
    const client = await this.owner.connect();
    let frozen: ServiceProcess | undefined;
    try {
      await client.query("BEGIN");
      const { rowCount } = await client.query("SELECT 1 FROM rail_high_water WHERE account_id = ANY($1) FOR UPDATE", [accounts]);
      if (!rowCount) {
        await client.query("ROLLBACK");
        this.miss("proxy-stall", "no hot account has a mark yet");
        return;
      }
      // Wait (briefly) for a proxy's admission to queue behind the held rows.
      for (let i = 0; i < 100 && !frozen; i++) {
        const { rows } = await this.owner.query<{ application_name: string }>(
          "SELECT application_name FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name LIKE 'rail-proxy/%'",
        );
        frozen = drill.mesh.proxies.find((p) => p.running && rows.some((r) => r.application_name === `rail-proxy/${p.opts.env.REPLICA_ID}`));
        if (!frozen) await sleep(50);
      }
      if (frozen) frozen.pause();
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    if (!frozen) {
      this.miss("proxy-stall", "no admission queued on the held marks within 5 s");
      return;
    }
    this.record("proxy-stall", frozen.name, "frozen between admission and forward (hot accounts' marks held); swept, reconciled, resumed");
    try {
      await sleep(Math.max(this.d.ambiguityMs, this.d.settleMs) + 500);
      await this.d.reconcile();
    } finally {
      frozen.resume();
    }
  }

  private proxyAs() {
    const { drill } = this.d;
    const proxy = drill.mesh.proxies.find((p) => p.running);
    if (!proxy || !drill.mesh.lock) return undefined;
    return {
      proxy: drill.mesh.client(RailProxyService, proxy.url, "executor"),
      lock: drill.mesh.client(LockService, drill.mesh.lock.url, "executor"),
    };
  }

  /** A real lease for the rogue: it waits for the account like any executor (a few tries). */
  private async rogueLease(c: NonNullable<ReturnType<Nemesis["proxyAs"]>>, account: string) {
    let last: unknown;
    for (let i = 0; i < 5; i++) {
      try {
        return (await c.lock.acquire({ key: accountLockKey(account), owner: "rogue", ttlMs: 2000, waitMs: 3000 }, { timeoutMs: 6000 })).lease!;
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
          { accountId: account, payoutId, fencingToken: lease.fencingToken, fencingTokenSignature: lease.tokenSignature, amount: { amountMinor: 999_999_900n, currency: "EUR" }, beneficiary: "ben-rogue" },
          { timeoutMs: 5000 },
        )
        .then(
          (r) => `ADMITTED (${r.submission?.railReference || "no reference"})`,
          (err: unknown) => errorReason(err) || String(err),
        );
      this.record("rogue-submit", account, `made-up ${payoutId} for 999,999,900 to ben-rogue: ${answer}`);
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
        .query("UPDATE payouts SET state = 'PROCESSING', fence = $2, claimed_by = NULL, claimed_until = NULL WHERE payout_id = $1 AND fence < $2", [victim.payout_id, lease.fencingToken.toString()])
        .then(
          () => undefined,
          (err: unknown) => (err as Error).message,
        );
      if (refenced) {
        this.record("rogue-resubmit", victim.payout_id, `tried to reopen a ${victim.state} payout: refused by paydb (${refenced})`);
        return;
      }
      const ref = `${victim.payout_id}:t${lease.fencingToken}`;
      const answer = await c.proxy
        .submitPayout(
          {
            accountId: victim.account_id,
            payoutId: ref,
            fencingToken: lease.fencingToken,
            fencingTokenSignature: lease.tokenSignature,
            amount: { amountMinor: BigInt(victim.amount_minor), currency: victim.currency },
            beneficiary: victim.beneficiary,
          },
          { timeoutMs: 5000 },
        )
        .then(
          () => "ADMITTED",
          (err: unknown) => errorReason(err) || String(err),
        );
      this.record("rogue-resubmit", victim.payout_id, `re-fenced at ${lease.fencingToken} and resubmitted as ${ref}: ${answer}`);
    } finally {
      await c.lock.release({ key: accountLockKey(victim.account_id), leaseId: lease.leaseId }, { timeoutMs: 5000 }).catch(() => {});
    }
  }
}

/** Always last in the fault plan: a small latency so kills land between commit and answer. */
export const BASELINE_FAULTS = [{ kind: FaultKind.LATENCY, latencyMs: 30, count: 0, clientReferencePrefix: "" }];
