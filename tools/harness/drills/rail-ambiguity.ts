/**
 * C5 §5.7 rail ambiguity: some payments land but their answer is lost, some never land and the
 * rail hangs. Both become TIMEOUT (RAIL_AMBIGUOUS) with exactly one rail call each, payouts go
 * UNKNOWN, and the reconciler resolves every one against the statement: PAID when it landed,
 * NOT_PAID when it did not. Nothing is resubmitted.
 */
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { DrillMesh } from "./drill-mesh.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

export const railAmbiguity: Scenario = {
  name: "rail-ambiguity",
  summary: "rail answers lost (landed) or never landed: TIMEOUT, UNKNOWN, reconciled, never resubmitted",
  async run(p: DrillParams) {
    const total = p.payouts ?? 60;
    const landed = Math.max(2, Math.floor(total * (0.1 + p.rng() * 0.1)));
    const hung = Math.max(2, Math.floor(total * (0.1 + p.rng() * 0.1)));
    const notes: string[] = [];
    const failures: string[] = [];
    const drill = await DrillMesh.start({ lockBackend: p.lockBackend, proxies: 2, postgresUrl: p.postgresUrl, log: p.log });
    try {
      await drill.setFaults([
        { kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, count: landed, clientReferencePrefix: "" },
        { kind: FaultKind.NEVER_LAND_HANG, latencyMs: 0, count: hung, clientReferencePrefix: "" },
      ]);
      await drill.createPayouts(total, ["acc-1", "acc-2", "acc-3", "acc-4", "acc-5", "acc-6"], p.rng);
      for (let i = 0; i < 2; i++) await drill.addExecutor({ EXECUTOR_CONCURRENCY: "6" });
      const open = await drill.waitSettled(60_000);
      if (open !== 0) failures.push(`${open} payouts did not settle`);
      for (const e of drill.mesh.executors) await e.stop();
      const railCalls = Number((await drill.railControl().getFaults({})).submitCalls);

      const before = await drill.check(true);
      // Every injected fault is ambiguous; on a busy machine an ordinary call can also outlast the
      // proxy's deadline (it landed, so it must be resolved PAID below).
      const extra = before.counts.ambiguousUnresolved - (landed + hung);
      if (extra < 0) failures.push(`expected at least ${landed + hung} ambiguous submissions, found ${before.counts.ambiguousUnresolved}`);
      if (before.counts.payoutsUnknown !== before.counts.ambiguousUnresolved) failures.push(`expected ${before.counts.ambiguousUnresolved} UNKNOWN payouts, found ${before.counts.payoutsUnknown}`);
      // One rail call per intent, except those the proxy gave up before calling (NOT_FORWARDED).
      const forwarded = before.counts.intents - before.counts.notForwarded;
      if (railCalls !== forwarded) failures.push(`rail saw ${railCalls} calls for ${forwarded} forwarded intents (a resubmission?)`);
      const rec = await drill.reconcile();
      if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}`);
      const result = await drill.check(true);
      if (result.counts.resolvedPaid !== landed + Math.max(0, extra)) failures.push(`expected ${landed + Math.max(0, extra)} resolved PAID, found ${result.counts.resolvedPaid}`);
      if (result.counts.resolvedNotPaid !== hung) failures.push(`expected ${hung} resolved NOT_PAID, found ${result.counts.resolvedNotPaid}`);
      if (result.counts.payoutsUnknown !== 0) failures.push(`${result.counts.payoutsUnknown} payouts still UNKNOWN after reconciliation`);
      notes.push(`${landed} landed-but-lost, ${hung} never-landed, ${Math.max(0, extra)} ordinary calls past the deadline; rail calls ${railCalls} = forwarded intents ${forwarded}`);
      return {
        verdict: guardedVerdict(result.violations, failures),
        violations: result.violations,
        counts: { ...result.counts, ambiguousBeforeReconcile: before.counts.ambiguousUnresolved, railCalls },
        failures,
        notes,
      };
    } finally {
      await drill.stop();
    }
  },
};
