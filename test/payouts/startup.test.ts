/**
 * Start-up and shutdown contract: bad config exits 78 listing every problem, an unmigrated
 * paydb exits 70 before serving, health reports SERVING, SIGTERM drains and exits 0.
 */
import { inject } from "vitest";
import { afterAll, describe, expect, it } from "vitest";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { createPaydb, dropPaydb, sql, startPayouts } from "./support.js";
import { uniqueSuffix } from "../support/test-mesh.js";
import { ClientPool } from "../support/clients.js";

const dbs: string[] = [];
afterAll(async () => {
  for (const db of dbs) await dropPaydb(db);
});

async function runToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const proc = new ServiceProcess({ service: "payouts", env: { PORT: "0", METRICS_PORT: "0", ...env } });
  // start() rejects when the process exits before its ready line, which is what we expect here.
  const started = await proc.start().then(
    () => true,
    () => false,
  );
  if (started) await proc.stop(5000);
  expect(started).toBe(false);
  return { code: await proc.waitExit(), output: proc.lines.join("\n") };
}

describe("payouts start-up and shutdown", () => {
  it("exits 78 on bad configuration, naming every bad variable", async () => {
    const { code, output } = await runToExit({ PAYDB_URL: "", IDEMPOTENCY_LOCK_MS: "soon", PAYOUTS_DEFAULT_CLIENT_ID: "not valid!" });
    expect(code).toBe(78);
    for (const v of ["PAYDB_URL", "IDEMPOTENCY_LOCK_MS", "PAYOUTS_DEFAULT_CLIENT_ID"]) expect(output).toContain(v);
  });

  it("refuses an idempotency retention below 24 h without the test override, and below the lease even with it", async () => {
    const short = await runToExit({ PAYDB_URL: "postgres://127.0.0.1:1/none", IDEMPOTENCY_RETENTION_MS: "30000" });
    expect(short.code).toBe(78);
    expect(short.output).toContain("IDEMPOTENCY_RETENTION_MS");
    expect(short.output).toContain("IDEMPOTENCY_RETENTION_MIN_OVERRIDE");
    const belowLease = await runToExit({
      PAYDB_URL: "postgres://127.0.0.1:1/none",
      IDEMPOTENCY_RETENTION_MS: "20000",
      IDEMPOTENCY_LOCK_MS: "30000",
      IDEMPOTENCY_RETENTION_MIN_OVERRIDE: "true",
    });
    expect(belowLease.code).toBe(78);
    expect(belowLease.output).toContain("IDEMPOTENCY_LOCK_MS");
  });

  it("exits 70 against a paydb that was never migrated", async () => {
    const base = inject("pgUrl").replace(/\/[^/]*$/, "");
    const name = `paydb_unmigrated${uniqueSuffix()}`;
    await sql(`${base}/postgres`, `CREATE DATABASE ${name}`);
    dbs.push(`${base}/${name}`);
    const { code, output } = await runToExit({ PAYDB_URL: `${base}/${name}` });
    expect(code).toBe(70);
    expect(output).toContain("not migrated");
  });

  it("exits 70 when the money-limit store was never migrated (it would refuse every create)", async () => {
    const paydb = await createPaydb();
    dbs.push(paydb);
    const base = inject("pgUrl").replace(/\/[^/]*$/, "");
    const name = `limits_unmigrated${uniqueSuffix()}`;
    await sql(`${base}/postgres`, `CREATE DATABASE ${name}`);
    dbs.push(`${base}/${name}`);
    const { code, output } = await runToExit({ PAYDB_URL: paydb, LIMITS_DB_URL: `${base}/${name}` });
    expect(code).toBe(70);
    expect(output).toContain("limit store");
    expect(output).toContain("not migrated");
  });

  it("reports SERVING on grpc.health.v1, then drains on SIGTERM and exits 0", async () => {
    const paydb = await createPaydb();
    dbs.push(paydb);
    const svc = await startPayouts(paydb);
    const sessions = new ClientPool();
    try {
      const health = sessions.client(Health, svc.url);
      expect((await health.check({ service: PayoutService.typeName })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      expect(svc.ready).toMatchObject({ event: "ready", port: expect.any(Number), metricsPort: expect.any(Number) });
    } finally {
      sessions.close();
    }
    expect(await svc.stop(10_000)).toBe(0);
  });
});
