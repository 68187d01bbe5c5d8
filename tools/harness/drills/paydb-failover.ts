/**
 * paydb fails over under load (issue: "the proxy is safe because its mark sits in paydb" holds
 * only if paydb keeps what it acknowledged). A primary and a streaming standby behind one stable
 * address; payouts flow through the whole mesh; the primary is SIGKILLed again and again with
 * admissions committing and rail calls in flight, the standby promoted, the address repointed,
 * a new standby cloned. Then everything settles, the reconciler runs, and the audit judges.
 *
 * Each kill is aimed: the replication link is cut for a moment first, so whatever the primary
 * acknowledges meanwhile exists on the primary only, unless commits wait for the standby.
 * - synchronous replication (the standby named in synchronous_standby_names, proxies declaring
 *   PAYDB_DURABILITY=synchronous-standby): those commits wait and are never acknowledged; the
 *   drill must PASS with no acknowledged payout or intent lost.
 * - asynchronous replication, proxies declaring managed-ha (an operator who believed the HA
 *   was synchronous): the negative control. Acknowledged intents are lost with the primary, the
 *   rail has paid them, and the audit must find the payments with no intent (INTENT_FIRST); the
 *   report names each one and what it cost.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import type { Violation } from "../invariants.js";
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { ReplicatedPaydb } from "../replicated-paydb.js";
import type { ServiceProcess } from "../service-process.js";
import { DrillMesh } from "./drill-mesh.js";
import type { Rng } from "./rng.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

export interface FailoverOptions {
  name: string;
  summary: string;
  synchronous: boolean;
  /** Primary kills when the run does not say (--kills). */
  kills: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function paydbFailover(o: FailoverOptions): Scenario {
  return {
    name: o.name,
    summary: o.summary,
    expectsCorruption: !o.synchronous,
    suiteBackend: "pg",
    caughtBy: o.synchronous ? undefined : "INTENT_FIRST",
    async run(p: DrillParams) {
      const kills = p.kills ?? o.kills;
      const notes: string[] = [];
      const failures: string[] = [];
      const paydb = await ReplicatedPaydb.start({ synchronous: o.synchronous, log: p.log });
      let drill: DrillMesh | undefined;
      try {
        drill = await DrillMesh.start({
          lockBackend: p.lockBackend,
          proxies: 2,
          ownServers: p.lockBackend === "pg" ? ["lockdb"] : [],
          paydbServer: paydb,
          proxyEnv: {
            PAYDB_DURABILITY: o.synchronous ? "synchronous-standby" : "managed-ha",
            PAYDB_DURABILITY_CHECK_MS: "500",
          },
          postgresUrl: p.postgresUrl,
          log: p.log,
        });
        const d = drill;
        // The proxies' durability check reads pg_stat_replication.sync_state: pg_monitor (decision 024).
        await asAdmin(paydb, "GRANT pg_monitor TO railfence_rail_proxy");
        // The rail answers after a while: kills land with rail calls in flight.
        await d.setFaults([{ kind: FaultKind.LATENCY, latencyMs: 60, count: 0, clientReferencePrefix: "" }]);
        const accounts = Array.from({ length: 12 }, (_, i) => `acc-fo-${i + 1}`);
        for (let i = 0; i < 3; i++) await d.addExecutor({ EXECUTOR_CONCURRENCY: "4", LEASE_TTL_MS: "3000" });

        const load = new Load(d, accounts, p.rng);
        load.start();
        const failovers = [];
        try {
          for (let k = 1; k <= kills; k++) {
            // Load runs a while (admissions commit, rail calls go out), then the aimed kill.
            await load.waitAcknowledged(8, 20_000);
            await sleep(300 + Math.floor(p.rng() * 700));
            // Asynchronous: the kill waits until the rail has booked a few payments since the cut,
            // so the control loses paid intents however slow the machine is (synchronous commits
            // wait instead: nothing new can be admitted, so there is nothing to wait for).
            const cutMs = 400 + Math.floor(p.rng() * 800);
            const booked = o.synchronous ? undefined : await railPayments(d);
            const record = await paydb.failover({
              cutReplicationMs: cutMs,
              beforeKill: booked === undefined ? undefined : () => waitRailPayments(d, booked + 3, 20_000),
            });
            const inFlight = await d
              .query<{ n: number }>("SELECT count(*)::int AS n FROM rail_submissions WHERE state = 'FORWARDING'")
              .then((r) => r[0]!.n)
              .catch(() => -1);
            failovers.push({ ...record, forwardingAfter: inFlight });
            p.log(`[drill] kill ${k}/${kills}: promoted in ${record.promotedAfterMs} ms, WAL not received ${record.walLostBytes} bytes`);
          }
        } finally {
          await load.stop();
        }
        // Whatever the new primary does not know was lost with a primary.
        const known = new Set(
          (await d.query<{ payout_id: string }>("SELECT payout_id FROM payouts WHERE payout_id = ANY($1)", [load.acknowledged])).map((r) => r.payout_id),
        );
        const lostPayouts = load.acknowledged.filter((id) => !known.has(id));
        const open = await d.waitSettled(90_000);
        if (open !== 0) failures.push(`${open} payouts did not settle after the last failover`);
        for (const e of d.mesh.executors) await e.stop();
        const rec = await d.reconcile();
        if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}: ${rec.lines.slice(-2).join(" | ").slice(0, 300)}`);
        const result = await d.check(true);

        const silences = failovers
          .map((f) => load.silenceAround(f.killedAt))
          .filter((ms) => !Number.isNaN(ms))
          .sort((a, b) => a - b);
        let refusals = 0;
        for (const proxy of d.mesh.proxies) refusals += (await metricValue(proxy, "railfence_rail_proxy_not_durable_refusals_total")) ?? 0;
        const walLost = failovers.filter((f) => f.walLostBytes > 0).length;
        const promote = failovers.map((f) => f.promotedAfterMs).sort((a, b) => a - b);
        const attach = failovers.map((f) => f.standbyAttachedAfterMs).sort((a, b) => a - b);
        notes.push(
          `${failovers.length} primary kills (${o.synchronous ? "synchronous" : "asynchronous"} replication); the standby had not received the primary's last WAL at ${walLost} of them`,
          `promotion after the kill: median ${promote[promote.length >> 1] ?? 0} ms, max ${promote.at(-1) ?? 0} ms; a new standby attached after median ${attach[attach.length >> 1] ?? 0} ms`,
          `load: ${load.acknowledged.length} payouts acknowledged by the Payouts API, ${load.refused} creations refused or cut by a failover (retried under a new key: never acknowledged)`,
          `clients saw no creation acknowledged for median ${silences[silences.length >> 1] ?? 0} ms, max ${silences.at(-1) ?? 0} ms around a kill (replication cut included); admissions refused by the proxies' durability check (PAYDB_NOT_DURABLE): ${refusals}`,
        );
        if (lostPayouts.length > 0) {
          notes.push(`acknowledged payouts the new primary does not know: ${lostPayouts.length} (${lostPayouts.slice(0, 5).join(", ")})`);
          if (o.synchronous) failures.push(`${lostPayouts.length} payouts acknowledged to their client were lost in a failover`);
        }
        const unrecorded = result.violations.filter((v) => v.invariant === "INTENT_FIRST");
        const twice = result.violations.filter((v) => v.invariant === "INV-02");
        for (const line of await lossReport(d, unrecorded)) notes.push(line);
        for (const v of twice.slice(0, 10)) notes.push(`paid twice: ${v.detail}`);
        if (!o.synchronous && walLost === 0) failures.push("no kill found WAL the standby had not received: the control proved nothing");
        return {
          verdict: o.synchronous
            ? guardedVerdict(result.violations, failures)
            : result.violations.length > 0 && failures.length === 0
              ? "CORRUPTION_DETECTED"
              : "FAIL",
          violations: result.violations,
          counts: {
            ...result.counts,
            kills: failovers.length,
            killsWithWalNotReceived: walLost,
            acknowledgedPayouts: load.acknowledged.length,
            lostPayouts: lostPayouts.length,
            lostIntentsPaid: unrecorded.length,
            paidTwice: twice.length,
            notDurableRefusals: refusals,
            clientSilenceMaxMs: silences.at(-1) ?? 0,
          },
          failures,
          notes,
        };
      } finally {
        await drill?.stop();
        await paydb.stop().catch(() => {});
      }
    },
  };
}

/** Payouts created continuously through the Payouts API; a creation a failover cuts is not acknowledged. */
export class Load {
  readonly acknowledged: string[] = [];
  /** When each creation was acknowledged (epoch ms), in order. */
  readonly ackTimes: number[] = [];
  refused = 0;
  private running = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly drill: DrillMesh,
    private readonly accounts: string[],
    private readonly rng: Rng,
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      const client = this.drill.payoutsClient();
      while (this.running) {
        const batch = Array.from({ length: 4 }, () =>
          client
            .createPayout(
              {
                accountId: this.accounts[Math.floor(this.rng() * this.accounts.length)]!,
                amount: { amountMinor: BigInt(100 + Math.floor(this.rng() * 100_000)), currency: "EUR" },
                beneficiary: `ben-${Math.floor(this.rng() * 1000)}`,
              },
              { headers: { "idempotency-key": randomUUID() }, timeoutMs: 5000 },
            )
            .then(
              (r) => {
                this.acknowledged.push(r.payout!.payoutId);
                this.ackTimes.push(Date.now());
              },
              () => void this.refused++,
            ),
        );
        await Promise.all(batch);
        await sleep(40);
      }
    })();
  }

  /** How long clients saw no creation acknowledged around `at`: last ack before it to first after. */
  silenceAround(at: number): number {
    const after = this.ackTimes.find((t) => t > at);
    const before = [...this.ackTimes].reverse().find((t) => t <= at);
    return after !== undefined && before !== undefined ? after - before : Number.NaN;
  }

  /** Waits until `n` more payouts were acknowledged (bounded). */
  async waitAcknowledged(n: number, timeoutMs: number): Promise<void> {
    const target = this.acknowledged.length + n;
    const until = Date.now() + timeoutMs;
    while (this.acknowledged.length < target && Date.now() < until) await sleep(50);
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/**
 * What each lost commit cost: for every rail payment paydb has no intent for, what the rail paid,
 * what paydb now says of its payout, and how many times the rail paid that payout.
 */
export async function lossReport(d: DrillMesh, lost: Violation[]): Promise<string[]> {
  if (lost.length === 0) return [];
  const raildb = new pg.Pool({ connectionString: d.mesh.dbUrl("raildb"), max: 1 });
  raildb.on("error", () => {});
  try {
    const lines: string[] = [];
    for (const v of lost.slice(0, 20)) {
      const reference = String(v.row.client_reference ?? "");
      const payoutId = reference.replace(/:t\d+$/, "");
      const [paid] = (
        await raildb.query<{ amount_minor: string; currency: string; beneficiary: string }>(
          "SELECT amount_minor::text, currency, beneficiary FROM payments WHERE client_reference = $1 AND status = 'ACCEPTED' LIMIT 1",
          [reference],
        )
      ).rows;
      const times = (
        await raildb.query<{ n: number }>("SELECT count(*)::int AS n FROM payments WHERE status = 'ACCEPTED' AND split_part(client_reference, ':t', 1) = $1", [
          payoutId,
        ])
      ).rows[0]!.n;
      const [payout] = await d.query<{ state: string }>("SELECT state FROM payouts WHERE payout_id = $1", [payoutId]).catch(() => []);
      const cost = times > 1 ? `paid ${times} times: a double payment` : "paid once, with no intent left to prove it";
      lines.push(
        `lost intent ${reference}: the rail paid ${paid?.amount_minor ?? "?"} ${paid?.currency ?? ""} to ${paid?.beneficiary ?? "?"}; paydb now has ${payout ? `payout ${payout.state}` : "no such payout"}; ${cost}`,
      );
    }
    if (lost.length > 20) lines.push(`... and ${lost.length - 20} more lost intents`);
    return lines;
  } finally {
    await raildb.end().catch(() => {});
  }
}

/** Payments on the rail's own ledger (the drill reads raildb; nothing in the product does). */
export async function railPayments(d: DrillMesh): Promise<number> {
  const raildb = new pg.Client({ connectionString: d.mesh.dbUrl("raildb") });
  await raildb.connect();
  try {
    return (await raildb.query<{ n: number }>("SELECT count(*)::int AS n FROM payments")).rows[0]!.n;
  } finally {
    await raildb.end().catch(() => {});
  }
}

/** Waits until the rail has booked `n` payments in all (bounded). */
export async function waitRailPayments(d: DrillMesh, n: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while ((await railPayments(d)) < n && Date.now() < until) await sleep(100);
}

/** A counter of a service's /metrics (plain HTTP on its metrics port), summed over label sets. */
export async function metricValue(service: ServiceProcess, name: string): Promise<number | undefined> {
  const port = service.ready?.metricsPort;
  if (!port) return undefined;
  const text = await fetch(`http://127.0.0.1:${port}/metrics`)
    .then((r) => r.text())
    .catch(() => "");
  let sum: number | undefined;
  for (const line of text.split("\n")) {
    const [key, value] = line.split(" ");
    if (!key || key.startsWith("#") || value === undefined || key.replace(/\{.*\}$/, "") !== name) continue;
    sum = (sum ?? 0) + Number(value);
  }
  return sum;
}

export async function asAdmin(paydb: ReplicatedPaydb, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: paydb.url("postgres") });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end().catch(() => {});
  }
}
