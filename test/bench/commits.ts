/**
 * B3's commit accounting: who spends the PostgreSQL server's commits. The server's own count
 * (pg_stat_database.xact_commit, summed over every database) has no per-application breakdown;
 * each process counts its pools' transactions (railfence_db_transactions_total, scraped from its
 * /metrics), the bench counts its own queries the same way, and "other" is what the server
 * counted beyond all of them (autovacuum, connections outside the pools, timing slack).
 *
 * PostgreSQL reports a backend's counts to pg_stat_database with a delay: at most once a second
 * while it works, and up to 10 s after it falls idle. So xact_commit is read only after a quiet
 * settle (BENCH_STATS_SETTLE_MS), and the commits the processes counted during that settle (an
 * executor that polls keeps polling) are taken off: the run's window is its own start and end.
 */
import type pg from "pg";
import type { Registry } from "prom-client";
import { DB_TRANSACTIONS_METRIC } from "../../services/shared/db/transaction-count.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";

/** Longer than PostgreSQL's idle flush interval (PGSTAT_IDLE_INTERVAL, 10 s). */
const STATS_SETTLE_MS = Number(process.env.BENCH_STATS_SETTLE_MS ?? 11_000);
/** The proxy's admission batch sizes, if this build exports them. */
const BATCH_HISTOGRAM = "railfence_rail_proxy_admission_batch_size";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** A process's component: its name without the replica number (executor-2 -> executor). */
export const componentOf = (processName: string) => processName.replace(/-\d+$/, "");

/** What the counters said at one instant. */
export interface Counts {
  /** Commits counted by each component's processes (summed over replicas). */
  components: Map<string, number>;
  /** The bench's own commits. */
  bench: number;
  /** The proxies' admission batch-size histogram, summed over replicas (absent: not exported). */
  batch?: { sum: number; count: number; buckets: Map<number, number> };
}

/** Commits in the registry's railfence_db_transactions_total (the bench's own pools). */
async function commitsIn(registry: Registry): Promise<number> {
  const metric = registry.getSingleMetric(DB_TRANSACTIONS_METRIC);
  if (!metric) return 0;
  return (await metric.get()).values.filter((v) => v.labels.outcome === "commit").reduce((s, v) => s + v.value, 0);
}

/** Scrapes every running process's /metrics and the bench's registry, now. */
export async function countsNow(processes: ServiceProcess[], benchRegistry: Registry): Promise<Counts> {
  const components = new Map<string, number>();
  let batch: Counts["batch"];
  await Promise.all(
    processes
      .filter((p) => p.running && p.ready?.metricsPort)
      .map(async (p) => {
        const samples = parseSamples(await (await fetch(`http://127.0.0.1:${p.ready!.metricsPort}/metrics`)).text());
        const component = componentOf(p.name);
        const commits = samples.filter((s) => s.name === DB_TRANSACTIONS_METRIC && s.labels.outcome === "commit").reduce((a, s) => a + s.value, 0);
        components.set(component, (components.get(component) ?? 0) + commits);
        for (const s of samples) {
          if (!s.name.startsWith(BATCH_HISTOGRAM)) continue;
          batch ??= { sum: 0, count: 0, buckets: new Map() };
          if (s.name === `${BATCH_HISTOGRAM}_sum`) batch.sum += s.value;
          else if (s.name === `${BATCH_HISTOGRAM}_count`) batch.count += s.value;
          else if (s.name === `${BATCH_HISTOGRAM}_bucket`) {
            const le = s.labels.le === "+Inf" ? Number.POSITIVE_INFINITY : Number(s.labels.le);
            batch.buckets.set(le, (batch.buckets.get(le) ?? 0) + s.value);
          }
        }
      }),
  );
  return { components, bench: await commitsIn(benchRegistry), ...(batch ? { batch } : {}) };
}

/** The counters and the server's xact_commit after a quiet settle: one end of a run's window. */
export interface Settled {
  counts: Counts;
  xactCommit: number;
}

/** Waits for the server's statistics to catch up, then reads both counts. */
export async function settledCounts(processes: ServiceProcess[], benchRegistry: Registry, stats: pg.Pool): Promise<Settled> {
  await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
  const counts = await countsNow(processes, benchRegistry);
  const { rows } = await stats.query<{ c: string }>("SELECT sum(xact_commit)::text AS c FROM pg_stat_database");
  return { counts, xactCommit: Number(rows[0]!.c) };
}

const sumOf = (c: Counts) => [...c.components.values()].reduce((a, b) => a + b, 0) + c.bench;

/** Commits per payout of one run, by component, with the server's total. */
export interface RunCommits {
  perComponent: Record<string, number>;
  bench: number;
  other: number;
  total: number;
  /** total - bench: what the system spent, the goal's measure. */
  system: number;
  /** Mean and maximum admission batch size, when the proxies export them. */
  batch?: { mean: number; maxAtMost: number };
}

/**
 * A run's commits per payout. `before` settled just before the run started, `end` was counted as
 * it ended, `after` settled afterwards: the server's delta is taken over before..after, less
 * what the counters saw during the settle after the run.
 */
export function runCommits(before: Settled, end: Counts, after: Settled, payouts: number): RunCommits {
  const perComponent: Record<string, number> = {};
  for (const [k, v] of end.components) perComponent[k] = (v - (before.counts.components.get(k) ?? 0)) / payouts;
  const bench = (end.bench - before.counts.bench) / payouts;
  const total = (after.xactCommit - before.xactCommit - (sumOf(after.counts) - sumOf(end))) / payouts;
  const counted = Object.values(perComponent).reduce((a, b) => a + b, 0) + bench;
  const out: RunCommits = { perComponent, bench, other: total - counted, total, system: total - bench };
  const b0 = before.counts.batch;
  const b1 = end.batch;
  if (b1 && b1.count - (b0?.count ?? 0) > 0) {
    const n = b1.count - (b0?.count ?? 0);
    // The histogram keeps no maximum: the smallest bucket bound that holds every batch of the run.
    const bounds = [...b1.buckets.keys()].sort((a, b) => a - b);
    const maxAtMost = bounds.find((le) => (b1.buckets.get(le) ?? 0) - (b0?.buckets.get(le) ?? 0) >= n) ?? Number.POSITIVE_INFINITY;
    out.batch = { mean: (b1.sum - (b0?.sum ?? 0)) / n, maxAtMost };
  }
  return out;
}
