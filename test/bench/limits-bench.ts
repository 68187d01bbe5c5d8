/**
 * `npm run bench:limits`: what the fail-closed money limits cost CreatePayout, to decide whether
 * paydb is fast enough to be their store (docs/payouts-api.md#money-limits).
 *
 * One real payouts process on a durable PostgreSQL (fsync and synchronous commit on), closed-loop
 * CreatePayout load at c=1 and c=16, limits off vs on, in two shapes: "spread" (every request
 * its own account: no two requests share an amount counter) and "hot" (every request on one
 * account, one client: every request updates the same two counter rows, the worst case).
 * Prints a markdown table; the limit check's own latency comes from railfence_payouts_limit_check_duration_seconds.
 */
import type { Client } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { ClientPool } from "../../tools/harness/clients.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { closedLoop, cpuSeconds } from "./load.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP = 2;

async function histogramMeanMs(metricsPort: number, name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const value = (suffix: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name}${suffix}{`) || l.startsWith(`${name}${suffix} `));
    return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : undefined;
  };
  const sum = value("_sum");
  const count = value("_count");
  return sum !== undefined && count ? (sum / count) * 1000 : undefined;
}

/** Runs off and on back to back for each point (twice), so machine load drifts hit both alike. */
async function main(): Promise<void> {
  const pg = await PostgresServer.start({ durable: true });
  const rows: string[] = [];
  const services: Record<"off" | "on", { svc: ServiceProcess; sessions: ClientPool; client: Client<typeof PayoutService> }> = {} as never;
  try {
    for (const limits of ["off", "on"] as const) {
      const paydb = await pg.createDatabase(`paydb_limits_${limits}`);
      await migrate(paydb, "paydb");
      const env: Record<string, string> =
        limits === "on"
          ? { LIMIT_CLIENT_REQUESTS: "1000000000", LIMIT_ACCOUNT_DAILY_AMOUNT: "*=1000000000000000" }
          : { LIMIT_CLIENT_REQUESTS: "0", LIMIT_ACCOUNT_DAILY_AMOUNT: "*=off" };
      const svc = new ServiceProcess({
        service: "payouts",
        name: `payouts-limits-${limits}`,
        env: { PORT: "0", METRICS_PORT: "0", PAYDB_URL: paydb, OTEL_SDK_DISABLED: "true", ...env },
      });
      await svc.start();
      const sessions = new ClientPool();
      services[limits] = { svc, sessions, client: sessions.client(PayoutService, svc.url) };
    }
    for (let round = 1; round <= 2; round++) {
      for (const shape of ["spread", "hot"] as const) {
        for (const c of [1, 16]) {
          for (const limits of ["off", "on"] as const) {
            const { svc, client } = services[limits];
            let n = 0;
            const cpu0 = cpuSeconds(svc.pid!);
            const r = await closedLoop(
              c,
              SECONDS,
              WARMUP,
              async () => {
                n++;
                await client.createPayout(
                  {
                    accountId: shape === "hot" ? "acct-hot" : `acct-${round}-${c}-${n}`,
                    amount: { amountMinor: 1050n, currency: "EUR" },
                    beneficiary: "ben-1",
                  },
                  { headers: { "idempotency-key": randomUUID() } },
                );
              },
              (err) => errorReason(err) || "error",
            );
            const cpuMsPerOp = ((cpuSeconds(svc.pid!) - cpu0) * 1000) / Math.max(1, n);
            const errors =
              Object.entries(r.errors)
                .map(([k, v]) => `${k}:${v}`)
                .join(" ") || "0";
            rows.push(
              `| ${round} | ${shape} | ${c} | ${limits} | ${r.throughput.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${cpuMsPerOp.toFixed(2)} | ${errors} |`,
            );
            console.error(rows[rows.length - 1]);
          }
        }
      }
    }
    const mean = await histogramMeanMs(services.on.svc.ready!.metricsPort, "railfence_payouts_limit_check_duration_seconds");
    rows.push(`\nmean railfence_payouts_limit_check_duration_seconds (one consume_payout_limits round trip) over every "on" run: ${mean?.toFixed(2)} ms`);
  } finally {
    for (const s of Object.values(services)) {
      s.sessions.close();
      await s.svc.stop(5000);
    }
    await pg.destroy();
  }
  console.log(
    `CreatePayout, ${SECONDS} s per point after ${WARMUP} s warm-up, durable PostgreSQL, load avg ${(await import("node:os")).loadavg()[0]!.toFixed(1)}\n`,
  );
  console.log("| round | shape | c | limits | creates/s | p50 ms | p99 ms | payouts CPU ms/op | errors |");
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const r of rows) console.log(r);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
