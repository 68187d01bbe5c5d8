/**
 * The mesh a drill runs on: real PostgreSQL (optionally one server per database, so one can be
 * stopped alone), optionally a real etcd, rail-stub, rail-proxy replicas, the lock service on the
 * chosen backend, the payouts API, and executors. Helpers create load, wait for it to settle,
 * run the reconciler and the invariant checker.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { PayoutService } from "../../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { RailControlService, type FaultRule } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { FaultRuleSchema } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { checkInvariants, meshCheckTarget, type CheckResult } from "../invariants.js";
import { Mesh } from "../mesh.js";
import { PostgresServer } from "../postgres.js";
import type { DatabaseKind } from "../../../services/shared/db/migrate.js";
import { pick, type Rng } from "./rng.js";

export type LockBackend = "pg" | "etcd";

export interface DrillMeshOptions {
  lockBackend: LockBackend;
  proxies?: number;
  proxyEnv?: Record<string, string>;
  /** Databases that get a PostgreSQL server of their own. */
  ownServers?: DatabaseKind[];
  log?: (line: string) => void;
  /** Reuse this server for the shared databases (tests pass the run's server). */
  postgresUrl?: string;
  /** paydb on this server instead (the failover drill's replicated paydb); the drill owns it. */
  paydbServer?: { url(database: string): string };
  /** etcd backend: members of the etcd the lock service uses (1 unless told; 3 for the quorum drill). */
  etcdMembers?: 1 | 3;
}

/**
 * The proxies' timings in drills: short, so ambiguity shows up within seconds. The pre-forward
 * budget defaults to half the margin; the reconciler gets the same values, and a settlement
 * window above their sum (its config refuses anything less).
 */
export const DRILL_PROXY_TIMINGS = { RAIL_DEADLINE_MS: "1000", AMBIGUITY_MARGIN_MS: "1000", ADMISSION_TIMEOUT_MS: "2000" };
/** Above 2 x deadline + margin + admission (5000 ms), as the reconciler requires. */
export const DRILL_SETTLEMENT_WINDOW_MS = 5500;
/**
 * The reconciler's clock skew allowance in drills (its default, stated so every wait below
 * counts it): an intent is closed NOT_PAID only once it is older than the settlement window
 * plus this (decision 022). A drill that waited for the window alone reconciled too early and
 * left the intent open, so a stall "after NOT_PAID" resumed before any verdict.
 */
export const DRILL_CLOCK_SKEW_ALLOWANCE_MS = 1000;
/** The reconciler's settings in drills. */
export const DRILL_RECONCILER_ENV = {
  SETTLEMENT_WINDOW_MS: String(DRILL_SETTLEMENT_WINDOW_MS),
  CLOCK_SKEW_ALLOWANCE_MS: String(DRILL_CLOCK_SKEW_ALLOWANCE_MS),
  ...DRILL_PROXY_TIMINGS,
};
/** How old an intent must be before a drill's reconciler run may close it NOT_PAID. */
export const DRILL_VERDICT_AGE_MS = DRILL_SETTLEMENT_WINDOW_MS + DRILL_CLOCK_SKEW_ALLOWANCE_MS;

/**
 * Executors in drills present a fresh reference per attempt: the worst case (see submission-ref.ts).
 * They get the reconciler's window and allowance, as the chart gives them (decision 023: a
 * submission paydb forgot is decided from the statement after that long, not the 60 s default).
 */
export const UNTRUSTED_EXECUTOR_ENV = {
  EXECUTOR_SUBMISSION_REFERENCE: "attempt",
  POLL_INTERVAL_MS: "50",
  CALL_TIMEOUT_MS: "3000",
  SETTLEMENT_WINDOW_MS: String(DRILL_SETTLEMENT_WINDOW_MS),
  CLOCK_SKEW_ALLOWANCE_MS: String(DRILL_CLOCK_SKEW_ALLOWANCE_MS),
};

export class DrillMesh {
  readonly mesh: Mesh;
  readonly servers: Partial<Record<DatabaseKind, PostgresServer>> = {};
  etcd: import("../etcd.js").EtcdServer | undefined;
  /** The three-member cluster, when etcdMembers is 3 (then `etcd` is undefined). */
  etcdCluster: import("../etcd-cluster.js").EtcdCluster | undefined;
  private shared: PostgresServer | undefined;
  private paydb: pg.Pool | undefined;

  private constructor(
    readonly opts: DrillMeshOptions,
    mesh: Mesh,
  ) {
    this.mesh = mesh;
  }

  static async start(opts: DrillMeshOptions): Promise<DrillMesh> {
    const servers: Partial<Record<DatabaseKind, PostgresServer>> = {};
    for (const kind of opts.ownServers ?? []) servers[kind] = await PostgresServer.start();
    const mesh = new Mesh({
      postgresUrl: opts.postgresUrl,
      dbSuffix: opts.postgresUrl ? `_drill_${randomUUID().slice(0, 8).replace(/-/g, "")}` : "",
      servers: opts.paydbServer ? { ...servers, paydb: opts.paydbServer } : servers,
      // Drills run as production does: mutual TLS and per-method authorization on every hop.
      tls: true,
      signTokens: true,
      proxies: opts.proxies ?? 2,
      proxyEnv: { ...DRILL_PROXY_TIMINGS, SWEEP_INTERVAL_MS: "200", ...opts.proxyEnv },
      onLine: opts.log ? (name, line) => opts.log!(`[${name}] ${line}`) : undefined,
    });
    const drill = new DrillMesh(opts, mesh);
    Object.assign(drill.servers, servers);
    try {
      await mesh.start();
      const lockEnv: Record<string, string> = {};
      if (opts.lockBackend === "etcd" && opts.etcdMembers === 3) {
        const { EtcdCluster } = await import("../etcd-cluster.js");
        drill.etcdCluster = await EtcdCluster.start({ log: opts.log });
        lockEnv.LOCK_BACKEND = "etcd";
        // Every member: the lock service's client spreads calls over them (services/lock/config.ts).
        lockEnv.ETCD_ENDPOINTS = drill.etcdCluster.endpoints;
      } else if (opts.lockBackend === "etcd") {
        const { EtcdServer } = await import("../etcd.js");
        drill.etcd = await EtcdServer.start();
        lockEnv.LOCK_BACKEND = "etcd";
        lockEnv.ETCD_ENDPOINTS = drill.etcd.endpoint;
      }
      await mesh.startLock(lockEnv);
      await mesh.startPayouts();
      drill.paydb = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 4 });
      drill.paydb.on("error", () => {});
    } catch (err) {
      await drill.stop();
      throw err;
    }
    return drill;
  }

  get paydbUrl(): string {
    return this.mesh.dbUrl("paydb");
  }

  /** Starts an executor (untrusted mode) with extra env. */
  addExecutor(env: Record<string, string> = {}) {
    return this.mesh.addExecutor({ ...UNTRUSTED_EXECUTOR_ENV, ...env });
  }

  payoutsClient() {
    return this.mesh.client(PayoutService, this.mesh.payouts!.url, "client");
  }

  railControl() {
    return this.mesh.client(RailControlService, this.mesh.railControlUrl, "operator");
  }

  async setFaults(rules: Array<MessageInitShape<typeof FaultRuleSchema>>): Promise<void> {
    await this.railControl().setFaults({ rules: rules as FaultRule[] });
  }

  /** Creates payouts through the API (each with its own Idempotency-Key); returns their ids. */
  async createPayouts(n: number, accounts: string[], rng: Rng): Promise<string[]> {
    const client = this.payoutsClient();
    const ids: string[] = [];
    const batch = 20;
    for (let i = 0; i < n; i += batch) {
      const chunk = await Promise.all(
        Array.from({ length: Math.min(batch, n - i) }, () =>
          client.createPayout(
            {
              accountId: pick(rng, accounts),
              amount: { amountMinor: BigInt(100 + Math.floor(rng() * 100_000)), currency: "EUR" },
              beneficiary: `ben-${Math.floor(rng() * 1000)}`,
            },
            { headers: { "idempotency-key": randomUUID() } },
          ),
        ),
      );
      ids.push(...chunk.map((r) => r.payout!.payoutId));
    }
    return ids;
  }

  async query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
    return (await this.paydb!.query<T>(sql, params)).rows;
  }

  async payoutState(id: string): Promise<string | undefined> {
    return (await this.query<{ state: string }>("SELECT state FROM payouts WHERE payout_id = $1", [id]))[0]?.state;
  }

  /** Waits until no payout is PENDING/PROCESSING (bounded); returns how many are still open. */
  async waitSettled(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const open = await this.query<{ n: number }>("SELECT count(*)::int AS n FROM payouts WHERE state IN ('PENDING', 'PROCESSING')").then(
        (r) => r[0]!.n,
        () => -1,
      );
      if (open === 0 || Date.now() > deadline) return open;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /**
   * The payouts still open, as a failed liveness check should show them: what claims and fences
   * them, and what the proxy's ledger holds for them (so a stuck payout can be explained).
   */
  async describeOpenPayouts(limit = 10): Promise<string[]> {
    const rows = await this.query<Record<string, unknown>>(
      `SELECT p.payout_id, p.account_id, p.state, p.fence::text, p.claimed_by, p.claimed_until, p.updated_at,
              p.lost_submission_ref, p.submission_ref,
              (SELECT string_agg(s.payout_id || '=' || s.state, ',') FROM rail_submissions s WHERE s.payout_id LIKE p.payout_id || '%') AS intents,
              (SELECT mark::text FROM rail_high_water h WHERE h.account_id = p.account_id) AS mark, now() AS now
         FROM payouts p WHERE p.state IN ('PENDING', 'PROCESSING') ORDER BY p.created_at LIMIT $1`,
      [limit],
    ).catch((err: unknown) => [{ error: err instanceof Error ? err.message : String(err) }]);
    return rows.map((r) => JSON.stringify(r));
  }

  /**
   * Runs the reconciler once, after waiting until every intent is older than the settlement
   * window plus the clock skew allowance (so "absent from the statement" can mean NOT_PAID for
   * all of them).
   */
  async reconcile(settlementWindowMs = DRILL_SETTLEMENT_WINDOW_MS): Promise<{ code: number | null; lines: string[] }> {
    const [newest] = await this.query<{ age_ms: number | null }>(
      "SELECT (EXTRACT(EPOCH FROM now() - max(created_at)) * 1000)::float8 AS age_ms FROM rail_submissions",
    );
    const verdictAge = settlementWindowMs + DRILL_CLOCK_SKEW_ALLOWANCE_MS + 500;
    const wait = Math.max(0, verdictAge - (newest?.age_ms ?? verdictAge));
    await new Promise((r) => setTimeout(r, wait));
    return this.mesh.reconcileOnce({ ...DRILL_RECONCILER_ENV, SETTLEMENT_WINDOW_MS: String(settlementWindowMs) });
  }

  /** Holds a payout's claim (as if its holder were busy), so no other executor takes it. */
  async holdClaim(payoutId: string): Promise<void> {
    await this.query("UPDATE payouts SET claimed_until = now() + interval '1 hour' WHERE payout_id = $1", [payoutId]);
  }

  /** Lets any executor claim the payout again. */
  async releaseClaim(payoutId: string): Promise<void> {
    await this.query("UPDATE payouts SET claimed_by = NULL, claimed_until = NULL WHERE payout_id = $1 AND state IN ('PENDING', 'PROCESSING')", [payoutId]);
  }

  async check(quiescent = true): Promise<CheckResult> {
    return checkInvariants(meshCheckTarget(this.mesh), { quiescent });
  }

  /** Log lines of one process matching an event (parsed). */
  events(name: string, event: string): Array<Record<string, unknown>> {
    const proc = this.mesh.processes().find((p) => p.name === name);
    return (proc?.lines ?? []).filter((l) => l.includes(`"event":"${event}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  async waitEvent(name: string, event: string, match: (e: Record<string, unknown>) => boolean, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events(name, event).find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`${name} did not log ${event} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async stop(): Promise<void> {
    await this.paydb?.end().catch(() => {});
    await this.mesh.stop().catch(() => {});
    await this.etcd?.destroy().catch(() => {});
    await this.etcdCluster?.destroy().catch(() => {});
    for (const s of Object.values(this.servers)) await s?.destroy().catch(() => {});
    await this.shared?.destroy().catch(() => {});
  }
}
