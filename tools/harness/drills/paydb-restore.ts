/**
 * paydb restored to an earlier point while payouts are in flight (decision 036). Whatever paydb
 * acknowledged after the restore point is gone: intents the rail already paid, PAID writes,
 * payouts created meanwhile. Synchronous replication cannot help here: a restore forgets by
 * definition. What must hold is the procedure docs/deploy.md gives an operator:
 *
 *   1. executors scaled to zero (the disaster stopped them here: SIGKILL, mid-call);
 *   2. paydb restored (here: the copy that stopped receiving WAL at the restore point, which is
 *      what a base backup plus WAL up to that point is), behind the same address;
 *   3. the reconciler run once, its rail-payments-without-intent pass covering the time since the
 *      restore point: every payout the rail paid meanwhile becomes PAID from the rail's statement;
 *   4. executors back.
 *
 * Then nothing is paid twice. The audit still lists what the restore cost, and must: payments with
 * no intent (INTENT_FIRST) and payments of payouts paydb no longer has at all (UNMAPPED_PAYMENT,
 * their clients must be told). Any other violation fails the drill.
 *
 * Negative control (`blind`): step 3 with the pass off. The next executors pay again what the rail
 * had already paid, and the audit must find the double payments (INV-02).
 */
import type { Violation } from "../invariants.js";
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { ReplicatedPaydb } from "../replicated-paydb.js";
import { DRILL_RECONCILER_ENV, DrillMesh } from "./drill-mesh.js";
import { asAdmin, Load, lossReport, railPayments, waitRailPayments } from "./paydb-failover.js";
import type { DrillParams, Scenario } from "./scenario.js";

/** What the restore is allowed to cost (listed, never silent): everything else is a failure. */
const RESTORE_COSTS = new Set(["INTENT_FIRST", "UNMAPPED_PAYMENT"]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function paydbRestore(o: { name: string; summary: string; blind: boolean }): Scenario {
  return {
    name: o.name,
    summary: o.summary,
    expectsCorruption: o.blind,
    suiteBackend: "pg",
    caughtBy: o.blind ? "INV-02" : undefined,
    async run(p: DrillParams) {
      const notes: string[] = [];
      const failures: string[] = [];
      // The restore source follows the primary asynchronously, as a WAL archive does.
      const paydb = await ReplicatedPaydb.start({ synchronous: false, log: p.log });
      let drill: DrillMesh | undefined;
      try {
        drill = await DrillMesh.start({
          lockBackend: p.lockBackend,
          proxies: 2,
          ownServers: p.lockBackend === "pg" ? ["lockdb"] : [],
          paydbServer: paydb,
          proxyEnv: { PAYDB_DURABILITY: "single-node" },
          postgresUrl: p.postgresUrl,
          log: p.log,
        });
        const d = drill;
        await asAdmin(paydb, "GRANT pg_monitor TO railfence_rail_proxy");
        await d.setFaults([{ kind: FaultKind.LATENCY, latencyMs: 60, count: 0, clientReferencePrefix: "" }]);
        const accounts = Array.from({ length: 12 }, (_, i) => `acc-rs-${i + 1}`);
        const executorEnv = { EXECUTOR_CONCURRENCY: "4", LEASE_TTL_MS: "3000" };
        for (let i = 0; i < 3; i++) await d.addExecutor(executorEnv);

        const load = new Load(d, accounts, p.rng);
        load.start();
        const passEnv: Record<string, string> = o.blind ? { UNRECORDED_PAYMENT_WATCH_MS: "0" } : {};
        let procedure: { code: number | null; lines: string[] } | undefined;
        try {
          await load.waitAcknowledged(20, 30_000);
          // The restore point lies 2-3 s back, and at least 8 rail payments back (however slow the
          // machine): everything paydb acknowledged since is forgotten.
          const cutAt = Date.now();
          const booked = await railPayments(d);
          const record = await paydb.failover({
            cutReplicationMs: 2000 + Math.floor(p.rng() * 1000),
            beforeKill: () => waitRailPayments(d, booked + 8, 30_000),
            afterKill: async () => {
              for (const e of d.mesh.executors) e.kill("SIGKILL");
            },
          });
          const restorePointLagMs = record.killedAt - cutAt;
          p.log(`[drill] restored to ${restorePointLagMs} ms before the disaster: ${record.walLostBytes} bytes of WAL forgotten`);
          notes.push(
            `paydb restored to a point ${restorePointLagMs} ms before the disaster: ${record.walLostBytes} bytes of WAL it had acknowledged forgotten`,
          );
          for (const e of d.mesh.executors) await e.stop(1000).catch(() => null);
          // Step 3 of the procedure, then the executors come back.
          procedure = await d.mesh.reconcileOnce({ ...DRILL_RECONCILER_ENV, ...passEnv });
          for (let i = 0; i < 3; i++) await d.addExecutor(executorEnv);
          await load.waitAcknowledged(20, 30_000);
          await sleep(1000);
        } finally {
          await load.stop();
        }
        const summary = procedure?.lines.filter((l) => l.includes('"reconcile_summary"')).at(-1);
        const unrecorded = summary ? (JSON.parse(summary) as { decisions: Record<string, number> }).decisions.UNRECORDED : undefined;
        notes.push(
          `the reconciler after the restore (pass ${o.blind ? "off: the negative control" : "on"}): ${unrecorded ?? "?"} rail payments with no intent found and taken as their payouts' payments`,
        );
        if (procedure?.code !== 0) failures.push(`the reconciler after the restore exited ${procedure?.code}`);

        const open = await d.waitSettled(90_000);
        if (open !== 0) failures.push(`${open} payouts did not settle after the restore`);
        for (const e of d.mesh.executors) await e.stop();
        const rec = await d.reconcile();
        if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}: ${rec.lines.slice(-2).join(" | ").slice(0, 300)}`);
        const result = await d.check(true);

        const costs = result.violations.filter((v) => RESTORE_COSTS.has(v.invariant));
        const others = result.violations.filter((v) => !RESTORE_COSTS.has(v.invariant));
        const lostIntents = costs.filter((v) => v.invariant === "INTENT_FIRST");
        notes.push(
          `the restore's cost, listed by the audit: ${lostIntents.length} rail payments whose intent was forgotten, ${costs.length - lostIntents.length} payments of payouts paydb no longer has`,
        );
        for (const line of await lossReport(d, lostIntents)) notes.push(line);
        for (const v of others.slice(0, 10)) notes.push(`${v.invariant}: ${v.detail}`);
        if (lostIntents.length === 0) failures.push("the restore forgot no intent the rail had paid: it proved nothing");
        const verdict = o.blind
          ? others.some((v) => v.invariant === "INV-02") && failures.length === 0
            ? "CORRUPTION_DETECTED"
            : "FAIL"
          : others.length === 0 && failures.length === 0
            ? "PASS"
            : "FAIL";
        return {
          verdict,
          // What the restore cost is reported in the notes; only the rest judges the drill.
          violations: o.blind ? result.violations : others,
          counts: {
            ...result.counts,
            acknowledgedPayouts: load.acknowledged.length,
            unrecordedFoundAfterRestore: unrecorded ?? -1,
            lostIntentsPaid: lostIntents.length,
            paymentsOfForgottenPayouts: costs.length - lostIntents.length,
            paidTwice: others.filter((v: Violation) => v.invariant === "INV-02").length,
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
