/**
 * `npm run bench`: what the fence costs, measured against the raw floor in the same run.
 *
 *   B0  raw floor: the proxy's own two statements (admission + outcome) issued directly with pg
 *       from this process, on an identical database of the same PostgreSQL server; and direct
 *       rail calls (the unsafe baseline the ADR replaces).
 *   B1  SubmitPayout through 1 and 2 rail-proxy replicas, rail stub with no added latency,
 *       10,000 accounts, tokens minted here (no lock service).
 *   B2  B1 with 10 hot accounts (per-account serialisation, ADR-007 §7.3).
 *   B3  payouts paid by the whole system, as the previous design and as the current one, each at
 *       c=1 and c=32 in fresh meshes (b3.ts): the executor path alone, then end to end (created
 *       through the payouts API first); create->terminal latency, CPU per payout by process
 *       (PostgreSQL included), commits per payout by component against the server's xact_commit
 *       (commits.ts), admission batch sizes.
 *   F   the design's floor: the proxy's two statements and one rail call on bare node:http2, nothing
 *       else (floor-proxy-server.ts), on its own paydb and rail stub: what the protocol costs.
 *   B5  RPC floor: one unary call's server CPU on node:http2, grpc-js, connect-node and rail-proxy.
 *   L   hot-path layouts: B1 (one replica, c=16) with each side of the proxy's money path on
 *       connect-node or on the direct unary gRPC path (RAILFENCE_CONNECT_UNARY), side by side;
 *       CPU per submission in RPC units (B5's bare node:http2 server CPU per call).
 *   S   as shipped: B1 through proxies with mutual TLS and tracing to a file (what `npm start` and
 *       the chart run), at c=16 and 64, both layouts and the shipped one with tracing off (what
 *       telemetry costs), with the proxies' and the stub's peak RSS.
 *
 * The run ends with two goal tables: the hot path's (full runs only), and B3's (previous design
 * and current design side by side, both measured in this run).
 *
 * Flags (after `npm run bench --`): --proxy-node-args "<node flags>" passes flags to every proxy
 * (with --cpu-prof and --cpu-prof-dir=DIR the bench ends with the proxies' CPU by package);
 * --b3-node-args "<node flags>" the same for the executors and the lock service; --skip-shipped.
 *
 * Environment:
 *   BENCH_ONLY=B3             only B3, the direct rail points its goals read (c=1, 32) and B3's goals
 *                             (about 5 minutes instead of 10+)
 *   BENCH_SECONDS             each closed-loop point's length (default 4), after 1 s of warm-up
 *   BENCH_CONCURRENCY         the hot path's concurrencies (default 1,4,16,64)
 *   BENCH_SEED                the load generator's seed (default 7)
 *   BENCH_PREPARED_PER_POINT  fenced payouts prepared per hot-path point
 *   BENCH_B3_PAYOUTS          payouts per B3 run at c=32 (default 1000; e.g. 200 for a quick check)
 *   BENCH_B3_C1_PAYOUTS       payouts of B3's c=1 run (default 100)
 *   BENCH_B3_WARMUP_PAYOUTS   unrecorded payouts through each fresh B3 mesh first (default 20)
 *   BENCH_STATS_SETTLE_MS     wait before each read of pg_stat_database (default 11000: PostgreSQL
 *                             reports an idle backend's counts up to 10 s late)
 *   BENCH_PROXY_NODE_ARGS, BENCH_B3_NODE_ARGS, BENCH_SKIP_SHIPPED=1: as the flags above
 *   RAILFENCE_RESULTS=off     do not add the run's row to docs/results.md (a scratch run)
 *
 * PostgreSQL runs with default durability (fsync and synchronous_commit on). Results go to
 * reports/bench/ (JSON, markdown, SVG).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { seededRng } from "../../tools/harness/drills/rng.js";
import { connectClient } from "../../tools/harness/clients.js";
import { checkInvariants, meshCheckTarget } from "../../tools/harness/invariants.js";
import { Mesh } from "../../tools/harness/mesh.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { ADMISSION_SQL } from "../../services/rail-proxy/submission-store.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { svgChart, type Series } from "./chart.js";
import { startFloorProxy } from "./floor-proxy.js";
import { measureServer, RPC_SERVER_KINDS, rpcFloor } from "./rpc-floor.js";
import { profileTable, summarizeProfiles } from "./profile-summary.js";
import { closedLoop, cpuSeconds, peakRssMb, type PointResult } from "./load.js";
import { recordResult } from "../../tools/harness/results-log.js";
import { b3Workload, runB3, runKey } from "./b3.js";
import type { RunCommits } from "./commits.js";
import { directRail } from "./direct-rail.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const WARMUP = 1;
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,4,16,64").split(",").map(Number);
const SEED = Number(process.env.BENCH_SEED ?? 7);
const POOL = 20; // the proxy's PAYDB_POOL_MAX default: the raw floor gets the same connections

/** `--name value` from the command line. */
function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const splitArgs = (v: string | undefined) => (v ? v.split(/\s+/).filter(Boolean) : undefined);
const PROXY_NODE_ARGS = splitArgs(flag("proxy-node-args") ?? process.env.BENCH_PROXY_NODE_ARGS);
const B3_NODE_ARGS = splitArgs(flag("b3-node-args") ?? process.env.BENCH_B3_NODE_ARGS);
const SHIPPED = !process.argv.includes("--skip-shipped") && process.env.BENCH_SKIP_SHIPPED !== "1";
const ONLY = process.env.BENCH_ONLY?.toUpperCase();
if (ONLY !== undefined && ONLY !== "B3") throw new Error(`BENCH_ONLY=${process.env.BENCH_ONLY}: the only section that runs alone is B3`);
/** Only B3 and its goals (BENCH_ONLY=B3). */
const ONLY_B3 = ONLY === "B3";
/** The concurrencies B3 runs at, and its goals read the direct rail at. */
const B3_GOAL_C = [1, 32];
/** The layouts of the proxy's two hops (server, rail client): RAILFENCE_CONNECT_UNARY's values. */
const LAYOUTS = [
  { name: "connect server + connect client", env: { RAILFENCE_CONNECT_UNARY: "1" } },
  { name: "connect server + direct client", env: { RAILFENCE_CONNECT_UNARY: "server" } },
  { name: "direct server + connect client", env: { RAILFENCE_CONNECT_UNARY: "client" } },
  { name: "direct server + direct client (shipped)", env: {} },
] as const;
/** The concurrency the layouts, RPC units and the goals are read at. */
const GOAL_C = 16;
/** Workload F: the design's floor (floor-proxy-server.ts). */
const FLOOR = "F floor proxy (bare)";
/** Workload F with group admission and grouped outcome writes (decision 068). */
const FLOOR_GROUPED = "F floor proxy (bare), group admission";

interface Row extends PointResult {
  workload: string;
  concurrency: number;
  proxyCpuUsPerOp?: number;
}

const rows: Row[] = [];
/** B3's CPU per payout (ms) by process, per B3 workload. */
const b3Cpu: Record<string, Record<string, number>> = {};
/** B3's commits per payout, per run ("<workload> c=<n>"). */
const b3Commits: Record<string, RunCommits> = {};
const reason = (err: unknown) => errorReason(err) || Code[ConnectError.from(err).code] || "ERROR";
const log = (s: string) => console.log(s);

function record(workload: string, concurrency: number, r: PointResult, extra: Partial<Row> = {}) {
  const row = { workload, concurrency, ...r, ...extra };
  rows.push(row);
  log(
    `${workload.padEnd(22)} c=${String(concurrency).padStart(2)}  ${r.throughput.toFixed(0).padStart(6)} ops/s  p50 ${r.p50.toFixed(2)} ms  p95 ${r.p95.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms` +
      (row.proxyCpuUsPerOp !== undefined ? `  proxy CPU ${row.proxyCpuUsPerOp.toFixed(0)} µs/op` : "") +
      (Object.keys(r.errors).length ? `  errors ${JSON.stringify(r.errors)}` : ""),
  );
}

/**
 * The proxy pays only payouts an executor fenced (SPEC C3 §3.9): each point's payouts are inserted
 * before it is timed, fenced with the token each one will be submitted with, as an executor leaves
 * them (claimed for a day, so B3's executors never take them over): the measured work is the proxy's alone.
 */
async function insertFencedPayouts(db: pg.Pool, ops: Array<{ payoutId: string; accountId: string; token: bigint }>): Promise<void> {
  for (let i = 0; i < ops.length; i += 10_000) {
    const chunk = ops.slice(i, i + 10_000);
    await db.query(
      `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence, claimed_by, claimed_until)
       SELECT id, 'bench', acc, 1050, 'EUR', 'ben-1', 'PROCESSING', tok, 'bench', now() + interval '1 day'
         FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(id, acc, tok)`,
      [chunk.map((o) => o.payoutId), chunk.map((o) => o.accountId), chunk.map((o) => o.token.toString())],
    );
  }
}

/** After the points: the bench closes its payouts as an executor would (the checker reads them). */
async function closeBenchPayouts(db: pg.Pool): Promise<void> {
  await db.query(
    `UPDATE payouts p
        SET state = CASE WHEN s.state = 'ACCEPTED' THEN 'PAID' WHEN s.state IN ('REJECTED', 'NOT_FORWARDED') THEN 'FAILED' ELSE 'UNKNOWN' END,
            rail_reference = s.rail_reference, claimed_by = NULL, claimed_until = NULL
       FROM rail_submissions s
      WHERE s.bound_payout_id = p.payout_id AND p.client_id = 'bench' AND p.state = 'PROCESSING'`,
  );
  await db.query(
    "UPDATE payouts SET state = 'FAILED', failure_reason = 'BENCH_UNUSED', claimed_by = NULL, claimed_until = NULL WHERE client_id = 'bench' AND state = 'PROCESSING'",
  );
}

/**
 * The proxy's hot path (B0, B1, B2, L, F, B5) on one mesh; peak RSS into rss. Returns the
 * checker's violation count for that mesh.
 */
async function hotPath(server: PostgresServer, rss: Record<string, number>): Promise<number> {
  const rand = seededRng(SEED);
  const mesh = new Mesh({ postgres: server, proxies: 2, proxyEnv: { PAYDB_POOL_MAX: String(POOL) }, proxyNodeArgs: PROXY_NODE_ARGS });
  try {
    await mesh.start();
    // B0's database: same server, same schema, its own rows (so paydb's checker run stays meaningful).
    const rawUrl = await server.createDatabase("paydb_raw");
    await migrate(rawUrl, "paydb");
    const raw = new pg.Pool({ connectionString: rawUrl, max: POOL });
    const paydbOwner = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 2 });

    // Tokens are minted here, strictly increasing per account, as a lock service would.
    const makeAccounts = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, next: 1n }));
    const nextToken = (accounts: Array<{ id: string; next: bigint }>) => {
      const a = accounts[Math.floor(rand() * accounts.length)]!;
      const t = a.next;
      a.next += 1n;
      return { accountId: a.id, token: t };
    };
    /**
     * The proxy pays only payouts an executor fenced (SPEC C3 §3.9). Each point's payouts are
     * inserted before it is timed, fenced with the token each one will be submitted with, as an
     * executor leaves them: the measured work is the proxy's alone.
     */
    const fencedPayouts = async (db: pg.Pool, prefix: string, accounts: Array<{ id: string; next: bigint }>, count: number) => {
      const ops = Array.from({ length: count }, (_, k) => ({ payoutId: `${prefix}-${k}`, ...nextToken(accounts) }));
      await insertFencedPayouts(db, ops);
      let next = 0;
      return () => {
        const op = ops[next++];
        if (!op) throw new ConnectError("bench ran out of prepared payouts", Code.ResourceExhausted);
        return op;
      };
    };
    /** Enough prepared payouts for a point, from a generous upper bound on its throughput. */
    const PREPARED = Number(process.env.BENCH_PREPARED_PER_POINT ?? Math.ceil(8000 * (SECONDS + WARMUP)));

    // B0: the proxy's SQL, raw.
    for (const c of CONCURRENCY) {
      const next = await fencedPayouts(raw, `raw${c}`, makeAccounts(10_000, `raw${c}`), PREPARED);
      const cpu0 = process.cpuUsage();
      const r = await closedLoop(
        c,
        SECONDS,
        WARMUP,
        async () => {
          const { payoutId, accountId, token } = next();
          // Prepared, like the proxy's (same statements, same pool size).
          const res = await raw.query({
            name: "b0_admit",
            text: ADMISSION_SQL.admit,
            values: [payoutId, payoutId, accountId, token.toString(), "1050", "EUR", "ben-1", "raw"],
          });
          if (res.rows[0]?.outcome !== "ADMITTED") throw new ConnectError(res.rows[0]?.outcome ?? "refused", Code.Aborted);
          await raw.query({ name: "b0_outcome", text: ADMISSION_SQL.recordOutcome, values: [payoutId, "ACCEPTED", `rr_${payoutId.slice(-8)}`, null, null, 1] });
        },
        reason,
      );
      // The same CPU accounting as the proxy's: this process's user+sys per statement pair.
      const used = process.cpuUsage(cpu0);
      const served = r.ops + Object.values(r.errors).reduce((a, b) => a + b, 0);
      record("B0 raw SQL", c, r, { proxyCpuUsPerOp: (used.user + used.system) / (served * ((SECONDS + WARMUP) / SECONDS)) });
    }

    // B0: direct rail calls (no fence at all), on a stub with its own ledger.
    for (const { concurrency, result } of await directRail(server, "raildb_direct", CONCURRENCY, { seconds: SECONDS, warmup: WARMUP }, reason)) {
      record("B0 direct rail", concurrency, result);
    }

    // B1 / B2: through the proxy.
    const throughProxies = async (
      workload: string,
      targets: Array<{ url: string; pid?: number | undefined }>,
      accountCount: number,
      concurrencies = CONCURRENCY,
      db = paydbOwner,
    ) => {
      const clients = targets.map((p) => connectClient(RailProxyService, p.url));
      const pids = targets.map((p) => p.pid!);
      for (const c of concurrencies) {
        const prefix = `${workload.replace(/\W/g, "")}${c}`;
        const next = await fencedPayouts(db, prefix, makeAccounts(accountCount, prefix), PREPARED);
        let i = 0;
        const cpuBefore = pids.reduce((s, pid) => s + cpuSeconds(pid), 0);
        const r = await closedLoop(
          c,
          SECONDS,
          WARMUP,
          async () => {
            const { payoutId, accountId, token } = next();
            await clients[i++ % clients.length]!.submitPayout({
              accountId,
              payoutId,
              fencingToken: token,
              amount: { amountMinor: 1050n, currency: "EUR" },
              beneficiary: "ben-1",
            });
          },
          reason,
        );
        const cpu = pids.reduce((s, pid) => s + cpuSeconds(pid), 0) - cpuBefore;
        // CPU covers warm-up too: divide by every op the proxies served in the window.
        const served = r.ops + Object.values(r.errors).reduce((a, b) => a + b, 0);
        record(workload, c, r, { proxyCpuUsPerOp: (cpu / (served * ((SECONDS + WARMUP) / SECONDS))) * 1e6 });
      }
    };
    await throughProxies("B1 proxy x1", mesh.proxies.slice(0, 1), 10_000);
    await throughProxies("B1 proxy x2", mesh.proxies.slice(0, 2), 10_000);
    await throughProxies("B2 hot (10 accounts)", mesh.proxies.slice(0, 2), 10);

    // L: the hot-path layouts side by side, one fresh replica each, same database and rail.
    const layoutProxies: ServiceProcess[] = [];
    for (const layout of LAYOUTS) {
      const proxy = await mesh.addProxy(layout.env);
      layoutProxies.push(proxy);
      // A fresh process: one unrecorded point first, so JIT warm-up is not charged to the layout.
      const recorded = rows.length;
      await throughProxies(`L warm-up ${layout.name}`, [proxy], 10_000, [GOAL_C]);
      rows.splice(recorded);
      await throughProxies(`L ${layout.name}`, [proxy], 10_000, [GOAL_C]);
    }
    await closeBenchPayouts(paydbOwner);
    const proxyRss = mesh.proxies.map((p) => peakRssMb(p.pid!));
    for (const p of layoutProxies) await p.stop();

    // F: the design's floor, the proxy's work and nothing else (floor-proxy-server.ts), on its
    // own paydb and rail stub so that the checker's view of the mesh stays the real proxies'.
    const floorDbUrl = await server.createDatabase("paydb_floor");
    await migrate(floorDbUrl, "paydb");
    const floorDb = new pg.Pool({ connectionString: floorDbUrl, max: 2 });
    const floorStub = new ServiceProcess({
      service: "rail-stub",
      name: "rail-stub-floor",
      env: { PORT: "0", METRICS_PORT: "0", RAILDB_URL: await server.createDatabase("raildb_floor"), RAIL_CREDENTIALS_FILE: mesh.credentialFile },
    });
    await floorStub.start();
    const floor = await startFloorProxy(floorDbUrl, floorStub.url, mesh.credential);
    // The floor again with group admission (decision 068): the new floor of the protocol.
    const grouped = await startFloorProxy(floorDbUrl, floorStub.url, mesh.credential, 32);
    try {
      await throughProxies("F warm-up", [floor], 10_000, [GOAL_C], floorDb);
      await throughProxies(FLOOR, [floor], 10_000, CONCURRENCY, floorDb);
      await throughProxies("F warm-up grouped", [grouped], 10_000, [GOAL_C], floorDb);
      await throughProxies(FLOOR_GROUPED, [grouped], 10_000, CONCURRENCY, floorDb);
    } finally {
      await grouped.stop();
      await floor.stop();
      await floorStub.stop();
      await floorDb.end();
    }

    // B5: the RPC floor. One unary call, same minimal client: bare servers per stack, then the
    // running rail-proxy (railfence's server on connect-node, with its interceptors).
    for (const kind of RPC_SERVER_KINDS) {
      for (const r of await rpcFloor(kind, CONCURRENCY, SECONDS)) record(`B5 RPC floor: ${kind}`, r.concurrency, r, { proxyCpuUsPerOp: r.serverCpuUsPerCall });
    }
    for (const c of CONCURRENCY) {
      const r = await measureServer(mesh.proxies[0]!.url, mesh.proxies[0]!.pid!, c, SECONDS);
      record("B5 RPC floor: rail-proxy", c, r, { proxyCpuUsPerOp: r.serverCpuUsPerCall });
    }

    rss["rail-proxy-1"] = proxyRss[0]!;
    rss["rail-proxy-2"] = proxyRss[1]!;
    rss["rail-stub"] = peakRssMb(mesh.railStub.pid!);
    // Zero invariant violations in every bench run.
    const check = await checkInvariants(meshCheckTarget(mesh), { quiescent: true });
    await raw.end();
    await paydbOwner.end();
    return check.violations.length;
  } finally {
    await mesh.stop();
  }
}

async function main(): Promise<void> {
  const server = await PostgresServer.start({ durable: true });
  const rss: Record<string, number> = {};
  const violations = { previous: 0, current: 0 };
  try {
    if (!ONLY_B3) violations.current += await hotPath(server, rss);
    // B3, and the direct rail at the concurrencies its goals read, if the hot path did not run them.
    const missing = B3_GOAL_C.filter((c) => !rows.some((r) => r.workload === "B0 direct rail" && r.concurrency === c));
    for (const { concurrency, result } of await directRail(server, "raildb_direct_b3", missing, { seconds: SECONDS, warmup: WARMUP }, reason)) {
      record("B0 direct rail", concurrency, result);
    }
    const b3 = await runB3({ server, seed: SEED, proxyPoolMax: POOL, proxyNodeArgs: PROXY_NODE_ARGS, b3NodeArgs: B3_NODE_ARGS, record });
    Object.assign(b3Cpu, b3.cpu);
    Object.assign(b3Commits, b3.commits);
    Object.assign(rss, b3.rss);
    violations.previous += b3.violations.previous;
    violations.current += b3.violations.current;
    if (!ONLY_B3 && SHIPPED) violations.current += await shipped(server, rss);
    report(rss, violations);
  } finally {
    await server.destroy();
  }
  profileReport("proxies", PROXY_NODE_ARGS);
  profileReport("executors and lock", B3_NODE_ARGS);
}

/** With --cpu-prof and --cpu-prof-dir among the node flags: the profiles' CPU by package. */
function profileReport(who: string, args: string[] | undefined): void {
  const dir = args?.find((a) => a.startsWith("--cpu-prof-dir="))?.slice("--cpu-prof-dir=".length);
  if (!dir || !args?.includes("--cpu-prof")) return;
  const table = profileTable(summarizeProfiles(dir));
  const out = join(projectRoot(), "reports", "bench", `profile-${who.split(" ")[0]}.md`);
  writeFileSync(out, `CPU of the ${who} by package (${dir}):\n\n${table}\n`);
  log(`\nCPU of the ${who} by package (${dir}):\n${table}\nwritten: ${out}`);
}

/**
 * S: the proxy as shipped (npm start, the chart): mutual TLS on every hop and tracing on, spans
 * batched to a file as `npm start` writes them (OTEL_TRACES_SAMPLER, if set, applies). Its own
 * mesh on the same PostgreSQL server; returns the checker's violation count.
 */
async function shipped(server: PostgresServer, rss: Record<string, number>): Promise<number> {
  const stateDir = mkdtempSync(join(tmpdir(), "railfence-bench-shipped-"));
  const traces = { RAILFENCE_TRACE_FILE: join(stateDir, "traces.jsonl") };
  const mesh = new Mesh({
    postgres: server,
    dbSuffix: "_shipped",
    tls: true,
    proxies: 0,
    proxyEnv: { PAYDB_POOL_MAX: String(POOL), ...traces },
    railStubEnv: traces,
    proxyNodeArgs: PROXY_NODE_ARGS,
  });
  try {
    await mesh.start();
    // Both layouts as shipped, and the shipped layout once more with tracing off: the difference
    // is what telemetry costs (the rest is mutual TLS).
    const direct = LAYOUTS[LAYOUTS.length - 1]!;
    const layouts = [
      { ...LAYOUTS[0], rssKey: "shipped connect rail-proxy" },
      { ...direct, rssKey: "shipped direct rail-proxy" },
      { name: `${direct.name}, tracing off`, env: { ...direct.env, OTEL_SDK_DISABLED: "true" }, rssKey: "shipped direct rail-proxy, tracing off" },
    ];
    const proxies = [];
    for (const l of layouts) proxies.push(await mesh.addProxy(l.env));
    const owner = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 2 });
    const rand = seededRng(SEED + 1);
    for (const [k, l] of layouts.entries()) {
      const proxy = proxies[k]!;
      const client = mesh.client(RailProxyService, proxy.url, "executor");
      for (const c of [GOAL_C, 64]) {
        const prefix = `shipped${k}c${c}`;
        const accounts = Array.from({ length: 10_000 }, (_, i) => ({ id: `${prefix}-${i}`, next: 1n }));
        const ops = Array.from({ length: Math.ceil(4000 * (SECONDS + WARMUP)) }, (_, n) => {
          const a = accounts[Math.floor(rand() * accounts.length)]!;
          const t = a.next++;
          return { payoutId: `${prefix}-${n}`, accountId: a.id, token: t };
        });
        await insertFencedPayouts(owner, ops);
        let next = 0;
        const before = cpuSeconds(proxy.pid!);
        const r = await closedLoop(
          c,
          SECONDS,
          WARMUP,
          async () => {
            const op = ops[next++];
            if (!op) throw new ConnectError("bench ran out of prepared payouts", Code.ResourceExhausted);
            await client.submitPayout({ ...op, fencingToken: op.token, amount: { amountMinor: 1050n, currency: "EUR" }, beneficiary: "ben-1" });
          },
          reason,
        );
        const served = r.ops + Object.values(r.errors).reduce((a, b) => a + b, 0);
        record(`S shipped: ${l.name}`, c, r, { proxyCpuUsPerOp: ((cpuSeconds(proxy.pid!) - before) / (served * ((SECONDS + WARMUP) / SECONDS))) * 1e6 });
      }
      rss[l.rssKey] = peakRssMb(proxy.pid!);
    }
    rss["shipped rail-stub"] = peakRssMb(mesh.railStub.pid!);
    await closeBenchPayouts(owner);
    await owner.end();
    const check = await checkInvariants(meshCheckTarget(mesh), { quiescent: true });
    return check.violations.length;
  } finally {
    await mesh.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/**
 * The performance goals (issue "the proxy's hot path near its floor"), read from this run only:
 * CPU in RPC units (one unary call's server CPU on a bare node:http2 server, B5, at GOAL_C).
 */
function goals(rss: Record<string, number>): string[] {
  if (ONLY_B3) return [];
  const at = (w: string, c: number) => rows.find((r) => r.workload === w && r.concurrency === c);
  const unit = at("B5 RPC floor: node-http2", GOAL_C)?.proxyCpuUsPerOp;
  if (!unit) return [];
  const units = (w: string, c = GOAL_C) => (at(w, c)?.proxyCpuUsPerOp ?? Number.NaN) / unit;
  const tp = (w: string, c = GOAL_C) => at(w, c)?.throughput ?? Number.NaN;
  const yes = (ok: boolean) => (ok ? "yes" : "**no**");
  const b1 = units("B1 proxy x1");
  const shippedUnits = units(`S shipped: ${LAYOUTS[LAYOUTS.length - 1]!.name}`);
  const untracedUnits = units(`S shipped: ${LAYOUTS[LAYOUTS.length - 1]!.name}, tracing off`);
  const direct = tp("B1 proxy x1") / tp("B0 direct rail");
  const overB0 = tp("B1 proxy x2") / tp("B0 raw SQL");
  const c1 = at("B1 proxy x1", 1);
  const c1Direct = at("B0 direct rail", 1);
  const c1Raw = at("B0 raw SQL", 1);
  const added = c1 && c1Direct ? c1.p50 - c1Direct.p50 : Number.NaN;
  const b3 = tp(E2E_NOW, 32) / tp("B1 proxy x2");
  // The same measures for the design's floor (F): what the protocol alone allows on this machine.
  const floorUnits = units(FLOOR);
  const floorDirect = tp(FLOOR) / tp("B0 direct rail");
  const floorOverB0 = tp(FLOOR) / tp("B0 raw SQL");
  const floorAdded = (at(FLOOR, 1)?.p50 ?? Number.NaN) - (c1Direct?.p50 ?? Number.NaN);
  // B3's bound at today's protocol: PostgreSQL's CPU per payout alone, on every core, with every
  // Node process costing nothing.
  const pgMs = b3Cpu[runKey(E2E_NOW, 32)]?.["postgres (all databases)"] ?? Number.NaN;
  const pgBound = (cpus().length * 1000) / pgMs / tp("B1 proxy x2");
  const b3Exec = tp(b3Workload("executors only", "current"), 32) / tp("B1 proxy x2");
  const proxyRss = Math.max(rss["rail-proxy-1"] ?? 0, rss["rail-proxy-2"] ?? 0);
  const shippedRss = rss["shipped direct rail-proxy"];
  const layoutRows = LAYOUTS.map((l) => {
    const u = units(`L ${l.name}`);
    return `| ${l.name} | ${u.toFixed(1)} | ${(u / units(`L ${LAYOUTS[0].name}`)).toFixed(2)} | ${tp(`L ${l.name}`).toFixed(0)} |`;
  });
  return [
    `RPC unit (B5 node:http2 server CPU per call, c=${GOAL_C}): ${unit.toFixed(0)} µs`,
    "",
    `| hot-path layout (B1, one replica, c=${GOAL_C}) | proxy CPU per submission (RPC units) | vs connect + connect | ops/s |`,
    "|---|---|---|---|",
    ...layoutRows,
    "",
    `| goal | this run | met? | the design's floor (F, one bare replica) |`,
    "|---|---|---|---|",
    `| rail-proxy CPU per submission <= 12 RPC units (c=${GOAL_C}) | ${b1.toFixed(1)} (h2c), ${shippedUnits.toFixed(1)} (shipped: mTLS + tracing; ${untracedUnits.toFixed(1)} with tracing off) | ${yes(b1 <= 12)} / ${yes(shippedUnits <= 12)} | ${floorUnits.toFixed(1)} (the proxy: ${(b1 / floorUnits).toFixed(2)}x the floor) |`,
    `| B1 / direct rail >= 0.6 (c=${GOAL_C}) | ${direct.toFixed(2)} | ${yes(direct >= 0.6)} | ${floorDirect.toFixed(2)} |`,
    `| B1 (2 replicas) / B0 raw SQL >= 0.5 (c=${GOAL_C}) | ${overB0.toFixed(2)} | ${yes(overB0 >= 0.5)} | ${floorOverB0.toFixed(2)} |`,
    c1 && c1Raw
      ? `| added median latency over direct rail at c=1 <= B0 median + 0.5 ms | +${added.toFixed(2)} ms vs ${(c1Raw.p50 + 0.5).toFixed(2)} ms | ${yes(added <= c1Raw.p50 + 0.5)} | +${floorAdded.toFixed(2)} ms |`
      : "| added median latency at c=1 | (c=1 not in this run) | | |",
    `| B3 end to end >= 0.5 x B1 (2 replicas, c=${GOAL_C}) | ${b3.toFixed(2)} (executor path alone: ${b3Exec.toFixed(2)}) | ${yes(b3 >= 0.5)} | <= ${pgBound.toFixed(2)} (PostgreSQL's ${pgMs.toFixed(1)} ms of CPU per payout alone, on ${cpus().length} cores) |`,
    `| rail-proxy peak RSS <= 150 MB (c=64) | ${proxyRss.toFixed(0)} MB (h2c)${shippedRss ? `, ${shippedRss.toFixed(0)} MB (shipped)` : ""} | ${yes(proxyRss <= 150 && (shippedRss ?? 0) <= 150)} | |`,
  ];
}

/** Where B3's CPU went: ms per payout by process, for each B3 workload, and the total. */
function b3CpuTable(): string[] {
  const workloads = Object.keys(b3Cpu);
  if (workloads.length === 0) return [];
  const names = [...new Set(workloads.flatMap((w) => Object.keys(b3Cpu[w]!)))];
  const total = (w: string) => Object.values(b3Cpu[w]!).reduce((a, b) => a + b, 0);
  return [
    "",
    `| B3 CPU per payout (ms) | ${workloads.join(" | ")} |`,
    `|---|${workloads.map(() => "---").join("|")}|`,
    ...names.map((n) => `| ${n} | ${workloads.map((w) => b3Cpu[w]![n]?.toFixed(2) ?? "").join(" | ")} |`),
    `| **total** | ${workloads.map((w) => total(w).toFixed(2)).join(" | ")} |`,
    "",
  ];
}

/** B3's end-to-end workload, as the current and the previous design. */
const E2E_NOW = b3Workload("end to end", "current");
const E2E_BEFORE = b3Workload("end to end", "previous");

/** Commits per payout by component, for each B3 run. */
function b3CommitsTable(): string[] {
  const runs = Object.keys(b3Commits);
  if (runs.length === 0) return [];
  const components = [...new Set(runs.flatMap((k) => Object.keys(b3Commits[k]!.perComponent)))].sort();
  const cells = (f: (r: RunCommits) => string) => runs.map((k) => f(b3Commits[k]!)).join(" | ");
  return [
    "",
    "Commits per payout (PostgreSQL commits: every one a WAL flush with synchronous_commit on). Components count their pools' transactions (railfence_db_transactions_total); the server's count is pg_stat_database.xact_commit summed over every database; other = server − all counted.",
    "",
    `| commits per payout | ${runs.join(" | ")} |`,
    `|---|${runs.map(() => "---").join("|")}|`,
    ...components.map((c) => `| ${c} | ${cells((r) => r.perComponent[c]?.toFixed(2) ?? "")} |`),
    `| bench (its own queries: inserts, waits, statistics reads) | ${cells((r) => r.bench.toFixed(2))} |`,
    `| other (not counted by any pool) | ${cells((r) => r.other.toFixed(2))} |`,
    `| **xact_commit, all databases** | ${cells((r) => r.total.toFixed(2))} |`,
    `| **the system's (xact_commit − bench)** | ${cells((r) => r.system.toFixed(2))} |`,
    `| admission batch size: mean / max | ${cells((r) => (r.batch ? `${r.batch.mean.toFixed(1)} / <= ${r.batch.maxAtMost}` : "n/a"))} |`,
  ];
}

/**
 * B3's goals, each as the previous design (this run) and the current one (this run): commits per
 * payout, end to end over the direct rail, create->PAID at c=1, invariant violations.
 */
function b3Goals(violations: { previous: number; current: number }): { lines: string[]; met: boolean } {
  const at = (w: string, c: number) => rows.find((r) => r.workload === w && r.concurrency === c);
  const system = (w: string, c: number) => b3Commits[runKey(w, c)]?.system ?? Number.NaN;
  const direct1 = at("B0 direct rail", 1);
  const direct32 = at("B0 direct rail", 32);
  const overDirect = (w: string) => (at(w, 32)?.throughput ?? Number.NaN) / (direct32?.throughput ?? Number.NaN);
  const p50 = (w: string) => at(w, 1)?.p50 ?? Number.NaN;
  const latencyBound = (direct1?.p50 ?? Number.NaN) * 3 + 20;
  const c1Bound = 0.5 * system(E2E_BEFORE, 1);
  const goals = [
    {
      goal: "commits per payout, end to end, c=1 (xact_commit of every database − the bench's own)",
      before: system(E2E_BEFORE, 1).toFixed(2),
      now: system(E2E_NOW, 1).toFixed(2),
      target: `<= 0.5 × previous = ${c1Bound.toFixed(2)}`,
      met: system(E2E_NOW, 1) <= c1Bound,
    },
    {
      goal: "commits per payout, end to end, c=32 (with batching)",
      before: system(E2E_BEFORE, 32).toFixed(2),
      now: system(E2E_NOW, 32).toFixed(2),
      target: "< 2",
      met: system(E2E_NOW, 32) < 2,
    },
    {
      goal: "B3 end to end / B0 direct rail, throughput at c=32",
      before: overDirect(E2E_BEFORE).toFixed(2),
      now: overDirect(E2E_NOW).toFixed(2),
      target: ">= 0.25",
      met: overDirect(E2E_NOW) >= 0.25,
    },
    {
      goal: "create -> PAID p50 at c=1 (ms)",
      before: p50(E2E_BEFORE).toFixed(1),
      now: p50(E2E_NOW).toFixed(1),
      target: `<= direct rail p50 (c=1) × 3 + 20 = ${latencyBound.toFixed(1)}`,
      met: p50(E2E_NOW) <= latencyBound,
    },
    {
      goal: "invariant violations after the bench",
      before: String(violations.previous),
      now: String(violations.current),
      target: "0",
      met: violations.current === 0,
    },
  ];
  return {
    met: goals.every((g) => g.met),
    lines: [
      "| goal | previous design (this run) | now (this run) | target | met? |",
      "|---|---|---|---|---|",
      ...goals.map((g) => `| ${g.goal} | ${g.before} | ${g.now} | ${g.target} | ${g.met ? "yes" : "**no**"} |`),
    ],
  };
}

function report(rss: Record<string, number>, violations: { previous: number; current: number }): void {
  const at = (w: string, c: number) => rows.find((r) => r.workload === w && r.concurrency === c);
  const ratios = ONLY_B3
    ? []
    : CONCURRENCY.map((c) => {
        const b0 = at("B0 raw SQL", c)!;
        const b1 = at("B1 proxy x1", c)!;
        const b12 = at("B1 proxy x2", c)!;
        const direct = at("B0 direct rail", c)!;
        return {
          concurrency: c,
          b1OverB0: b1.throughput / b0.throughput,
          b1x2OverB0: b12.throughput / b0.throughput,
          addedMedianMs: b1.p50 - b0.p50,
          b1OverDirectRail: b1.throughput / direct.throughput,
          proxyCpuUs: b1.proxyCpuUsPerOp ?? 0,
        };
      });
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, PostgreSQL 18 (fsync on, synchronous_commit on)`;
  const b3 = at(E2E_NOW, 32)!;
  const b3Before = at(E2E_BEFORE, 32)!;
  const floorC = CONCURRENCY.includes(16) ? 16 : CONCURRENCY[CONCURRENCY.length - 1]!;
  const b3GoalTable = b3Goals(violations);
  const lines = [
    `Machine: ${machine}. ${SECONDS} s per point after ${WARMUP} s warm-up, seed ${SEED}${ONLY_B3 ? ". BENCH_ONLY=B3: B3, the direct rail at c=1 and 32, and B3's goals" : ""}.`,
    "",
    "| workload | concurrency | ops/s | p50 ms | p95 ms | p99 ms | CPU µs/op (proxy; B0: the pg client; B5: the server) | errors |",
    "|---|---|---|---|---|---|---|---|",
    ...rows
      .filter((r) => !r.workload.includes("warm-up"))
      .map(
        (r) =>
          `| ${r.workload} | ${r.concurrency} | ${r.throughput.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p95.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.proxyCpuUsPerOp?.toFixed(0) ?? ""} | ${Object.entries(
            r.errors,
          )
            .map(([k, v]) => `${k} ${v}`)
            .join(", ")} |`,
      ),
    "",
    "B3 rows: ops/s = payouts per second from the first create to the last terminal write; p50/p95/p99 = create->terminal (paydb's created_at to the terminal write's updated_at); errors = payouts that ended other than PAID.",
    ...(ratios.length
      ? [
          "",
          "| concurrency | B1/B0 throughput | B1 (2 replicas)/B0 | B1 − B0 median (ms) | B1 / direct rail |",
          "|---|---|---|---|---|",
          ...ratios.map(
            (r) =>
              `| ${r.concurrency} | ${r.b1OverB0.toFixed(2)} | ${r.b1x2OverB0.toFixed(2)} | ${r.addedMedianMs.toFixed(2)} | ${r.b1OverDirectRail.toFixed(2)} |`,
          ),
        ]
      : []),
    "",
    `Peak RSS (MB): ${Object.entries(rss)
      .map(([k, v]) => `${k} ${v.toFixed(0)}`)
      .join(", ")}`,
    `B3 end to end at c=32: ${b3.throughput.toFixed(0)} payouts/s (previous design ${b3Before.throughput.toFixed(0)}), create->terminal p50 ${b3.p50.toFixed(0)} ms, p99 ${b3.p99.toFixed(0)} ms (previous design ${b3Before.p50.toFixed(0)} / ${b3Before.p99.toFixed(0)} ms)`,
    ...b3CpuTable(),
    ...b3CommitsTable(),
    "",
    ...(ONLY_B3
      ? []
      : [
          `B5: server CPU per unary call at c=${floorC}: ${["node-http2", "grpc-js", "connect-node", "rail-proxy"].map((k) => `${k} ${at(`B5 RPC floor: ${k}`, floorC)?.proxyCpuUsPerOp?.toFixed(0)} µs`).join(", ")}`,
        ]),
    `Invariant violations after the run: ${violations.current + violations.previous} (previous design's meshes ${violations.previous}, the rest ${violations.current})`,
    "",
    ...goals(rss),
    "",
    "B3 goals, the previous design and the current one measured in this run:",
    "",
    ...b3GoalTable.lines,
  ];
  const dir = join(projectRoot(), "reports", "bench");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "bench.json"),
    JSON.stringify({ machine, seconds: SECONDS, seed: SEED, only: ONLY ?? null, rows, ratios, rss, violations, b3Cpu, b3Commits }, null, 2),
  );
  writeFileSync(join(dir, "bench.md"), `${lines.join("\n")}\n`);
  const r16 = ratios.find((r) => r.concurrency === floorC);
  const b3Summary = `B3 end to end c=32 ${b3.throughput.toFixed(0)} payouts/s (previous design ${b3Before.throughput.toFixed(0)}), ${b3Commits[runKey(E2E_NOW, 32)]?.system.toFixed(2)} commits per payout (previous ${b3Commits[runKey(E2E_BEFORE, 32)]?.system.toFixed(2)}); B3 goals ${b3GoalTable.met ? "met" : "not all met"}; invariant violations ${violations.current + violations.previous}`;
  recordResult(
    "bench",
    ONLY_B3
      ? `BENCH_ONLY=B3, seed ${SEED}, ${cpus().length} cores: ${b3Summary}`
      : `${SECONDS} s per point, seed ${SEED}, ${cpus().length} cores: at c=${floorC} B1/B0 throughput ${r16?.b1OverB0.toFixed(2)}, B1 − B0 median ${r16?.addedMedianMs.toFixed(2)} ms, proxy CPU ${r16?.proxyCpuUs.toFixed(0)} µs/op; ${b3Summary}`,
  );
  if (!ONLY_B3) {
    const series: Series[] = ["B0 raw SQL", "B1 proxy x1", "B1 proxy x2", "B0 direct rail"].map((w) => ({
      name: w,
      points: CONCURRENCY.map((c) => ({ x: c, throughput: at(w, c)!.throughput, p99: at(w, c)!.p99 })),
    }));
    writeFileSync(join(dir, "bench.svg"), svgChart(series));
  }
  log(`\n${lines.join("\n")}`);
  log(`\nwritten: ${dir}/bench.{json,md${ONLY_B3 ? "" : ",svg"}}`);
  if (violations.current + violations.previous > 0) process.exitCode = 1;
}

await main();
