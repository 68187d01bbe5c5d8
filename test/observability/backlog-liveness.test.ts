/**
 * The backlog and liveness signals on real processes (decisions 060, 061): payouts created while
 * no executor runs show up on the payouts service's /metrics as a pending backlog with an age,
 * and leave it once paid; an executor's last-pass timestamp moves while its loop reaches paydb
 * and stops when it cannot; a reconciler pass in the CronJob mode is recorded in paydb and
 * exported by payouts. Negative controls: a dry-run pass records nothing, an executor denied
 * paydb stops passing, and a payouts role denied the read drops the gauges (and counts it).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { connectClient, eventually } from "../support/clients.js";
import { letTimePass, quietFor } from "../support/time.js";

/** Every sample of `name` on p's /metrics, keyed by its labels (component left out). */
async function samples(p: ServiceProcess, name: string): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${p.ready!.metricsPort}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = (m[2] ?? "")
      .split(",")
      .filter((l) => l && !l.startsWith("component="))
      .join(",");
    out.set(labels, Number(m[3]));
  }
  return out;
}

const backlog = (p: ServiceProcess) => samples(p, "railfence_payouts_backlog");
const ages = (p: ServiceProcess) => samples(p, "railfence_payouts_backlog_oldest_age_seconds");
const reconcilerPass = async (p: ServiceProcess) => (await samples(p, "railfence_reconciler_last_pass_timestamp_seconds")).get("");
const executorPass = async (p: ServiceProcess) => (await samples(p, "railfence_executor_last_pass_timestamp_seconds")).get("")!;

async function asAdmin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: t.mesh.dbUrl("paydb") });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

const t = useMesh({ proxies: 1, startTimeoutMs: 120_000 });

beforeAll(async () => {
  await t.mesh.startLock();
  await t.mesh.startPayouts();
});

describe("payout backlog and loop liveness", () => {
  const payoutIds: string[] = [];

  it("payouts created with no executor running are a pending backlog with an age; every state is exported, lower case", async () => {
    const client = connectClient(PayoutService, t.mesh.payouts!.url);
    for (let i = 0; i < 3; i++) {
      const { payout } = await client.createPayout(
        { accountId: `acc-backlog-${i}`, amount: { amountMinor: 100n, currency: "EUR" }, beneficiary: "ben-1" },
        { headers: { "idempotency-key": randomUUID() } },
      );
      payoutIds.push(payout!.payoutId);
    }
    // The gauges are read at most every 5 s: the first scrape may predate the payouts.
    const counts = await eventually(async () => {
      const b = await backlog(t.mesh.payouts!);
      return b.get('state="pending"') === 3 ? b : undefined;
    }, "backlog pending = 3");
    expect([...counts.keys()].sort()).toEqual(['state="needs_attention"', 'state="pending"', 'state="processing"', 'state="unknown"']);
    expect(counts.get('state="processing"')).toBe(0);
    const a = await eventually(async () => {
      const x = await ages(t.mesh.payouts!);
      return (x.get('state="pending"') ?? 0) > 1 ? x : undefined;
    }, "oldest pending age > 1 s");
    expect(a.get('state="pending"')).toBeLessThan(120);
    expect(a.get('state="processing"')).toBe(0);
  });

  it("two scrapes in a row share one paydb read; a later scrape reads again (the cache is bounded)", async () => {
    // paydb computes the age with now(): every fresh read gives a larger age. Three scrapes in a
    // row: the 5 s read can expire between at most one pair of them.
    const [x1, x2, x3] = [
      (await ages(t.mesh.payouts!)).get('state="pending"')!,
      (await ages(t.mesh.payouts!)).get('state="pending"')!,
      (await ages(t.mesh.payouts!)).get('state="pending"')!,
    ];
    expect(x1 === x2 || x2 === x3, `${x1} ${x2} ${x3}`).toBe(true);
    const first = x3;
    const later = await eventually(
      async () => {
        const x = (await ages(t.mesh.payouts!)).get('state="pending"')!;
        return x > first ? x : undefined;
      },
      "a fresh read",
      10_000,
    );
    expect(later).toBeGreaterThan(first);
  });

  it("with no pass ever recorded, the reconciler's last pass is exported as 0", async () => {
    expect(await reconcilerPass(t.mesh.payouts!)).toBe(0);
  });

  it("an executor's last pass moves while it claims, and the backlog empties once the payouts are paid", async () => {
    const executor = await t.mesh.addExecutor();
    const t1 = await eventually(async () => {
      const v = await executorPass(executor);
      return v > 0 ? v : undefined;
    }, "first executor pass");
    expect(Math.abs(t1 - Date.now() / 1000)).toBeLessThan(30);
    const t2 = await eventually(async () => {
      const v = await executorPass(executor);
      return v > t1 ? v : undefined;
    }, "a later executor pass");
    expect(t2).toBeGreaterThan(t1);
    const client = connectClient(PayoutService, t.mesh.payouts!.url);
    for (const id of payoutIds) await eventually(async () => (await client.getPayout({ payoutId: id })).payout?.state === 3, `payout ${id} PAID`);
    const after = await eventually(async () => {
      const b = await backlog(t.mesh.payouts!);
      return b.get('state="pending"') === 0 && b.get('state="processing"') === 0 ? b : undefined;
    }, "backlog empty");
    expect(after.get('state="unknown"')).toBe(0);
    expect((await ages(t.mesh.payouts!)).get('state="pending"')).toBe(0);
  });

  it("an executor that cannot claim (its paydb role denied the payouts table) stops passing (negative control)", async () => {
    const executor = t.mesh.executors[0]!;
    await asAdmin("REVOKE SELECT ON payouts FROM railfence_executor");
    try {
      await letTimePass(500, "a claim in flight when the grant went may still finish");
      const frozen = await executorPass(executor);
      await quietFor(1500, "POLL_INTERVAL_MS is 200: several passes would have happened");
      expect(await executorPass(executor)).toBe(frozen);
    } finally {
      await asAdmin("GRANT SELECT ON payouts TO railfence_executor");
    }
    const frozen = await executorPass(executor);
    await eventually(async () => (await executorPass(executor)) > frozen, "passing again after the grant");
  });

  it("a dry-run reconciler pass records nothing (negative control); a real pass is recorded in paydb and exported by payouts", async () => {
    const dry = await t.mesh.reconcileOnce({ RECONCILER_DRY_RUN: "true" });
    expect(dry.code, dry.lines.join("\n")).toBe(0);
    await quietFor(5500, "past the payouts service's 5 s read interval: a recorded dry run would show");
    expect(await reconcilerPass(t.mesh.payouts!)).toBe(0);

    const before = Date.now() / 1000;
    const run = await t.mesh.reconcileOnce();
    expect(run.code, run.lines.join("\n")).toBe(0);
    const first = await eventually(async () => {
      const v = (await reconcilerPass(t.mesh.payouts!)) ?? 0;
      return v > 0 ? v : undefined;
    }, "reconciler pass exported");
    expect(first).toBeGreaterThan(before - 5);
    expect(first).toBeLessThan(Date.now() / 1000 + 5);

    const again = await t.mesh.reconcileOnce();
    expect(again.code).toBe(0);
    await eventually(async () => ((await reconcilerPass(t.mesh.payouts!)) ?? 0) > first, "second pass exported");
  });

  it("a backlog read that fails leaves the gauges out of the scrape and is counted; they come back with the grant", async () => {
    const failures = async () => (await samples(t.mesh.payouts!, "railfence_payouts_backlog_read_failures_total")).get("") ?? 0;
    const before = await failures();
    await asAdmin("REVOKE SELECT ON reconciler_last_pass FROM railfence_payouts");
    try {
      await eventually(async () => (await backlog(t.mesh.payouts!)).size === 0, "backlog series gone", 10_000);
      expect(await reconcilerPass(t.mesh.payouts!)).toBeUndefined();
      expect(await failures()).toBeGreaterThan(before);
      // Every other metric is still served.
      expect((await samples(t.mesh.payouts!, "railfence_payouts_created_total")).get("")).toBe(3);
    } finally {
      await asAdmin("GRANT SELECT ON reconciler_last_pass TO railfence_payouts");
    }
    await eventually(async () => (await backlog(t.mesh.payouts!)).size === 4, "backlog series back", 10_000);
  });
});
