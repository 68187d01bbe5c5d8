/**
 * Lock service benchmark (not a test): `npm run build && npx tsx test/bench/lock-bench.ts`.
 *
 * Per backend, through the real lock service process over gRPC:
 *   - uncontended: CONCURRENCY clients, each on its own key, acquire + release in a loop;
 *   - contended: 8 clients on ONE key (wait_ms 30 s), acquire + release in a loop;
 * next to the raw floor measured in the same run on the same backend process:
 *   - pg: one conditional upsert (the shape of the service's acquire statement), CONCURRENCY clients;
 *   - etcd: one put-if-absent txn, CONCURRENCY clients.
 * Prints cycles per second, p50/p99 (ms) and the ratio service/raw; writes reports/bench/lock.json.
 * PostgreSQL runs durable (fsync, synchronous_commit on), as in production.
 * Env: BENCH_SECONDS (default 5), BENCH_CONCURRENCY (default 4).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { EtcdServer, etcdBinary } from "../../tools/harness/etcd.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { createEtcdClient } from "../../services/lock/etcd-client.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { LockServiceUnderTest } from "../lock/lock-fixture.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const CONTENDERS = 8;

interface Figures {
  ops: number;
  opsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Runs `workers` loops of op for SECONDS; latency per op. */
async function measure(workers: number, op: (worker: number) => Promise<void>): Promise<Figures> {
  const latencies: number[] = [];
  const until = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (performance.now() < until) {
        const t = performance.now();
        await op(w);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    ops: latencies.length,
    opsPerSecond: round(latencies.length / elapsed),
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99)),
  };
}

async function serviceFigures(env: Record<string, string>) {
  const svc = await new LockServiceUnderTest(env).start();
  try {
    const run = randomBytes(3).toString("hex");
    const cycle = async (key: string, waitMs: number) => {
      const { lease } = await svc.client.acquire({ key, owner: "bench", ttlMs: 30_000, waitMs });
      await svc.client.release({ key, leaseId: lease!.leaseId });
    };
    // Warm-up: connections, JIT, prepared plans.
    await measure(CONCURRENCY, (w) => cycle(`bench/warm/${run}/${w}`, 0)).catch(() => undefined);
    const uncontended = await measure(CONCURRENCY, (w) => cycle(`bench/solo/${run}/${w}`, 0));
    const contended = await measure(CONTENDERS, () => cycle(`bench/hot/${run}`, 30_000));
    return { uncontended, contended };
  } finally {
    await svc.stop();
  }
}

async function rawPg(url: string): Promise<Figures> {
  const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY });
  try {
    await pool.query(`CREATE TABLE IF NOT EXISTS raw_locks (key text PRIMARY KEY, token bigint NOT NULL, expires_at timestamptz NOT NULL)`);
    // One conditional upsert, the floor under the service's single-statement acquire.
    const sql = `INSERT INTO raw_locks AS l (key, token, expires_at) VALUES ($1, 1, now() - interval '1 second')
                 ON CONFLICT (key) DO UPDATE SET token = l.token + 1, expires_at = now() - interval '1 second'
                 WHERE l.expires_at <= now() RETURNING token`;
    await measure(CONCURRENCY, (w) => pool.query(sql, [`warm/${w}`]).then(() => undefined));
    return await measure(CONCURRENCY, (w) => pool.query(sql, [`raw/${w}`]).then(() => undefined));
  } finally {
    await pool.end();
  }
}

async function rawEtcd(endpoint: string): Promise<Figures> {
  const client = createEtcdClient({ endpoints: [endpoint], callTimeoutMs: 5000 });
  try {
    let n = 0;
    // One put-if-absent txn on a fresh key: the floor under the service's acquire txn.
    const op = async () => {
      const key = `raw/${n++}`;
      await client.if(key, "Create", "==", 0).then(client.put(key).value("x")).commit();
    };
    await measure(CONCURRENCY, op);
    return await measure(CONCURRENCY, op);
  } finally {
    client.close();
  }
}

const ratio = (service: Figures, raw: Figures) => ({
  throughput: Math.round((service.opsPerSecond / raw.opsPerSecond) * 1000) / 1000,
  p50: Math.round((service.p50Ms / raw.p50Ms) * 100) / 100,
});

async function main(): Promise<void> {
  const results: Record<string, unknown> = {};
  const table: Record<string, string | number>[] = [];
  const row = (backend: string, what: string, f: Figures) =>
    table.push({ backend, what, "ops/s": f.opsPerSecond, "p50 ms": f.p50Ms, "p99 ms": f.p99Ms, ops: f.ops });

  const postgres = await PostgresServer.start({ durable: true });
  try {
    const url = await postgres.createDatabase("lockdb");
    const raw = await rawPg(url);
    const svc = await serviceFigures({ LOCK_BACKEND: "pg", LOCKDB_URL: url });
    row("pg", "raw conditional upsert", raw);
    row("pg", "service acquire+release, uncontended", svc.uncontended);
    row("pg", `service acquire+release, ${CONTENDERS} on one key`, svc.contended);
    results.pg = { raw, ...svc, ratioServiceOverRaw: ratio(svc.uncontended, raw) };
  } finally {
    await postgres.destroy();
  }

  if (etcdBinary()) {
    const etcd = await EtcdServer.start();
    try {
      const raw = await rawEtcd(etcd.endpoint);
      const svc = await serviceFigures({ LOCK_BACKEND: "etcd", ETCD_ENDPOINTS: etcd.endpoint });
      row("etcd", "raw put-if-absent txn", raw);
      row("etcd", "service acquire+release, uncontended", svc.uncontended);
      row("etcd", `service acquire+release, ${CONTENDERS} on one key`, svc.contended);
      results.etcd = { raw, ...svc, ratioServiceOverRaw: ratio(svc.uncontended, raw) };
    } finally {
      await etcd.destroy();
    }
  } else {
    console.log("etcd not installed: etcd figures skipped");
  }

  console.table(table);
  for (const [backend, r] of Object.entries(results)) {
    const q = (r as { ratioServiceOverRaw: { throughput: number; p50: number } }).ratioServiceOverRaw;
    console.log(`${backend}: service/raw throughput ${q.throughput}, p50 ${q.p50}x`);
  }
  const report = {
    generatedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "", node: process.version },
    settings: { seconds: SECONDS, concurrency: CONCURRENCY, contenders: CONTENDERS, pgDurable: true },
    results,
  };
  const dir = join(projectRoot(), "reports", "bench");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "lock.json"), `${JSON.stringify(report, null, 2)}\n`);
  console.log(`wrote ${join(dir, "lock.json")}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
