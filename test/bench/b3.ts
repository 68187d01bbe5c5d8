/**
 * B3: payouts paid by the whole system (claim, lock, paydb fence, proxy, rail, outcome, release),
 * run twice in the same bench on the same PostgreSQL server: as the previous design (one
 * admission statement per submission, executors that poll, the stepwise create path, and the old
 * bench's 20 ms poll interval where the old B3 used it) and as the current one (every default).
 * Each design runs each concurrency in a fresh mesh of its own (2 proxies, lock, payouts, 2
 * executors x 16):
 *
 *   c=32  executors only (payouts inserted PENDING, as CreatePayout leaves them), then end to end
 *         (created through the payouts API, 50 at a time): BENCH_B3_PAYOUTS each (default 1000).
 *   c=1   end to end, one payout at a time, each waited for until terminal before the next is
 *         created, executors at their default poll interval: BENCH_B3_C1_PAYOUTS (default 100).
 *
 * Each run reports throughput, create->terminal latency (paydb's created_at to the terminal
 * write's updated_at, so the bench's own waiting adds nothing), CPU per payout by process
 * (PostgreSQL included), commits per payout by component (commits.ts) and the proxies' admission
 * batch sizes when they export them. The bench waits for payouts inside PostgreSQL (one DO block
 * per wait), so that its waiting costs one transaction, not one per poll.
 */
import { randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { createPool } from "../../services/shared/db/pg.js";
import { connectClient } from "../../tools/harness/clients.js";
import { seededRng } from "../../tools/harness/drills/rng.js";
import { checkInvariants, meshCheckTarget } from "../../tools/harness/invariants.js";
import { Mesh } from "../../tools/harness/mesh.js";
import type { PostgresServer } from "../../tools/harness/postgres.js";
import { countsNow, runCommits, settledCounts, type RunCommits } from "./commits.js";
import { cpuSeconds, peakRssMb, percentile, postgresCpuSeconds, type PointResult } from "./load.js";

/**
 * The two designs, as the services' settings select them. The previous design: one admission
 * statement per submission (ADMISSION_BATCH_MAX=1), executors that poll (EXECUTOR_WAKE=poll) and
 * write each fence and outcome alone (EXECUTOR_BATCH_MAX=1), one lockdb statement per lock call
 * (LOCKDB_BATCH_MAX=1) and each release its own commit at once (LOCKDB_RELEASE_CARRY_MS=0), the stepwise CreatePayout (a limit store of its own, here paydb itself:
 * LIMITS_DB_URL, decision 071), a rail stub booking each payment alone, and a proxy whose outcome
 * statement leaves the payout to the executor (decision 072; the harness's RAIL_PROXY_OUTCOME_ONLY,
 * as a proxy from before it). A build that does not
 * know a setting ignores it, and that part of the design is then simply not different.
 */
export const DESIGNS = [
  {
    key: "previous",
    label: "previous design",
    proxyEnv: { ADMISSION_BATCH_MAX: "1", RAIL_PROXY_OUTCOME_ONLY: "true" },
    executorEnv: { EXECUTOR_WAKE: "poll", EXECUTOR_BATCH_MAX: "1" },
    lockEnv: { LOCKDB_BATCH_MAX: "1", LOCKDB_RELEASE_CARRY_MS: "0" },
    railStubEnv: { RAIL_STUB_BATCH_MAX: "1" },
    payoutsEnv: (mesh: Mesh): Record<string, string> => ({ LIMITS_DB_URL: mesh.roleUrl("paydb", "payouts") }),
    /** The old B3 ran its executors at a 20 ms poll interval (c=32 only; c=1 is new). */
    c32ExecutorEnv: { POLL_INTERVAL_MS: "20" },
  },
  {
    key: "current",
    label: "current design",
    proxyEnv: {},
    executorEnv: {},
    lockEnv: {},
    railStubEnv: {},
    payoutsEnv: (_mesh: Mesh): Record<string, string> => ({}),
    c32ExecutorEnv: {},
  },
] as const;
export type DesignKey = (typeof DESIGNS)[number]["key"];

/** B3's workload names, as the report's rows carry them. */
export const b3Workload = (what: "executors only" | "end to end", design: DesignKey) => `B3 ${what} (${DESIGNS.find((d) => d.key === design)!.label})`;

export interface B3Options {
  server: PostgresServer;
  seed: number;
  proxyPoolMax: number;
  proxyNodeArgs?: string[] | undefined;
  b3NodeArgs?: string[] | undefined;
  /** Each run's row (workload, concurrency, result), as the bench records the others. */
  record: (workload: string, concurrency: number, r: PointResult) => void;
}

export interface B3Result {
  /** CPU per payout (ms) by process, per run ("<workload> c=<n>"). */
  cpu: Record<string, Record<string, number>>;
  /** Commits per payout, per run ("<workload> c=<n>"). */
  commits: Record<string, RunCommits>;
  violations: Record<DesignKey, number>;
  /** Peak RSS (MB) of the current design's c=32 processes. */
  rss: Record<string, number>;
}

const PAYOUTS_C32 = Number(process.env.BENCH_B3_PAYOUTS ?? 1000);
const PAYOUTS_C1 = Number(process.env.BENCH_B3_C1_PAYOUTS ?? 100);
/** Unrecorded payouts first, so that a fresh process's warm-up is not charged to the run. */
const WARMUP_PAYOUTS = Number(process.env.BENCH_B3_WARMUP_PAYOUTS ?? 20);
const OPEN = "state IN ('PENDING', 'PROCESSING')";

export const runKey = (workload: string, c: number) => `${workload} c=${c}`;

export async function runB3(opts: B3Options): Promise<B3Result> {
  const out: B3Result = { cpu: {}, commits: {}, violations: { previous: 0, current: 0 }, rss: {} };
  for (const design of DESIGNS) {
    for (const c of [1, 32] as const) await oneMesh(opts, design, c, out);
  }
  return out;
}

async function oneMesh(opts: B3Options, design: (typeof DESIGNS)[number], c: 1 | 32, out: B3Result): Promise<void> {
  const { server } = opts;
  const rand = seededRng(opts.seed + c);
  const mesh = new Mesh({
    postgres: server,
    dbSuffix: `_b3_${design.key}_c${c}`,
    proxies: 2,
    proxyEnv: { PAYDB_POOL_MAX: String(opts.proxyPoolMax), ...design.proxyEnv },
    lockEnv: design.lockEnv,
    railStubEnv: design.railStubEnv,
    proxyNodeArgs: opts.proxyNodeArgs,
    b3NodeArgs: opts.b3NodeArgs,
  });
  // The bench's own pools count their transactions as the services' pools do.
  const benchRegistry = new Registry();
  let paydb: ReturnType<typeof createPool> | undefined;
  let stats: ReturnType<typeof createPool> | undefined;
  try {
    await mesh.start();
    await mesh.startLock();
    await mesh.startPayouts(design.payoutsEnv(mesh));
    for (let i = 0; i < 2; i++) await mesh.addExecutor({ EXECUTOR_CONCURRENCY: "16", ...design.executorEnv, ...(c === 32 ? design.c32ExecutorEnv : {}) });
    paydb = createPool({ url: mesh.dbUrl("paydb"), max: 1, registry: benchRegistry, applicationName: "bench", statementTimeoutMs: 600_000 });
    stats = createPool({ url: server.url("postgres"), max: 1, registry: benchRegistry, applicationName: "bench" });
    const db = paydb;
    const payouts = connectClient(PayoutService, mesh.payouts!.url);
    const accounts = Array.from({ length: 200 }, (_, i) => `e2e-${i}`);
    const create = async () => {
      const { payout } = await payouts.createPayout(
        { accountId: accounts[Math.floor(rand() * accounts.length)]!, amount: { amountMinor: 1050n, currency: "EUR" }, beneficiary: "ben-1" },
        { headers: { "idempotency-key": randomUUID() } },
      );
      return payout!.payoutId;
    };
    /** Waits inside PostgreSQL (one transaction) until no payout `where` selects is open. */
    const waitSettled = async (where: string, pollSeconds: number) => {
      await db.query(
        `DO $$ BEGIN
           FOR i IN 1..${Math.ceil(300 / pollSeconds)} LOOP
             EXIT WHEN NOT EXISTS (SELECT 1 FROM payouts WHERE ${OPEN} AND (${where}));
             PERFORM pg_sleep(${pollSeconds});
           END LOOP;
         END $$`,
      );
    };
    const cpuNow = () => {
      const m = new Map<string, number>();
      for (const p of mesh.processes()) if (p.pid && p.running) m.set(p.name, cpuSeconds(p.pid));
      m.set("postgres (all databases)", postgresCpuSeconds(server.pid!));
      const own = process.cpuUsage();
      m.set("bench (load generator)", (own.user + own.system) / 1e6);
      return m;
    };
    const cpuPerPayoutMs = (before: Map<string, number>, after: Map<string, number>, n: number) =>
      Object.fromEntries([...after].filter(([k]) => before.has(k)).map(([k, v]) => [k, ((v - before.get(k)!) / n) * 1000]));
    /** Throughput and create->terminal latency of the payouts `where` selects. */
    const latencies = async (where: string, seconds: number): Promise<PointResult> => {
      const { rows } = await db.query<{ ms: number; state: string }>(
        `SELECT EXTRACT(EPOCH FROM updated_at - created_at) * 1000 AS ms, state FROM payouts WHERE ${where}`,
      );
      const sorted = rows.map((l) => Number(l.ms)).sort((a, b) => a - b);
      const errors: Record<string, number> = {};
      for (const r of rows) if (r.state !== "PAID") errors[r.state] = (errors[r.state] ?? 0) + 1;
      return {
        ops: rows.length - Object.values(errors).reduce((a, b) => a + b, 0),
        errors,
        seconds,
        throughput: rows.length / seconds,
        p50: percentile(sorted, 50),
        p95: percentile(sorted, 95),
        p99: percentile(sorted, 99),
      };
    };
    /** One measured run: settle, run, count, settle; recorded under workload. */
    let before = await (async () => {
      // Warm-up: a few payouts end to end, unrecorded.
      await Promise.all(Array.from({ length: WARMUP_PAYOUTS }, () => create()));
      await waitSettled("true", 0.05);
      return settledCounts(mesh.processes(), benchRegistry, stats!);
    })();
    const measured = async (workload: string, payoutCount: number, run: () => Promise<{ where: string }>) => {
      const cpu0 = cpuNow();
      const t0 = performance.now();
      const { where } = await run();
      const seconds = (performance.now() - t0) / 1000;
      const cpu1 = cpuNow();
      const end = await countsNow(mesh.processes(), benchRegistry);
      const after = await settledCounts(mesh.processes(), benchRegistry, stats!);
      const key = runKey(workload, c);
      out.cpu[key] = cpuPerPayoutMs(cpu0, cpu1, payoutCount);
      out.commits[key] = runCommits(before, end, after, payoutCount);
      before = after;
      opts.record(workload, c, await latencies(where, seconds));
    };

    if (c === 32) {
      await measured(b3Workload("executors only", design.key), PAYOUTS_C32, async () => {
        await db.query(
          `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary)
           SELECT 'bx-' || i, 'bench-exec', 'e2e-' || (i % 200), 1050, 'EUR', 'ben-1' FROM generate_series(1, $1::int) AS i`,
          [PAYOUTS_C32],
        );
        await waitSettled("client_id = 'bench-exec'", 0.05);
        return { where: "client_id = 'bench-exec'" };
      });
      const firstE2e = await db.query<{ t: string }>("SELECT now()::text AS t");
      const since = firstE2e.rows[0]!.t;
      await measured(b3Workload("end to end", design.key), PAYOUTS_C32, async () => {
        for (let i = 0; i < PAYOUTS_C32; i += 50) await Promise.all(Array.from({ length: Math.min(50, PAYOUTS_C32 - i) }, () => create()));
        const where = `client_id <> 'bench-exec' AND created_at > '${since}'`;
        await waitSettled(where, 0.05);
        return { where };
      });
      out.rss = design.key === "current" ? Object.fromEntries(mesh.processes().map((p) => [`B3 ${p.name}`, peakRssMb(p.pid!)])) : out.rss;
    } else {
      const ids: string[] = [];
      await measured(b3Workload("end to end", design.key), PAYOUTS_C1, async () => {
        for (let i = 0; i < PAYOUTS_C1; i++) {
          const id = await create();
          if (!/^[\w-]+$/.test(id)) throw new Error(`unexpected payout id ${id}`);
          ids.push(id);
          await waitSettled(`payout_id = '${id}'`, 0.002);
        }
        return { where: `payout_id IN (${ids.map((id) => `'${id}'`).join(", ")})` };
      });
    }
    for (const e of mesh.executors) await e.stop();
    const check = await checkInvariants(meshCheckTarget(mesh), { quiescent: true });
    out.violations[design.key] += check.violations.length;
  } finally {
    await paydb?.end().catch(() => {});
    await stats?.end().catch(() => {});
    await mesh.stop();
  }
}
