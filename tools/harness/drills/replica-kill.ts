/**
 * C5 §5.3 replica kill: continuous load while random rail-proxy replicas are SIGKILLed and
 * restarted. The rail answers after a small latency so that kills land between intent commit
 * and rail answer; those submissions become ambiguous and are closed by the reconciler against
 * the rail's statement, never by resubmission.
 */
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { DrillMesh } from "./drill-mesh.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

export const replicaKill: Scenario = {
  name: "replica-kill",
  summary: "SIGKILL random rail-proxy replicas under load, restart them; reconcile the ambiguity",
  async run(p: DrillParams) {
    const total = p.payouts ?? 2000;
    const accounts = Array.from({ length: Math.max(5, Math.min(50, Math.round(total / 40))) }, (_, i) => `acc-${i + 1}`);
    const notes: string[] = [];
    const failures: string[] = [];
    const drill = await DrillMesh.start({ lockBackend: p.lockBackend, proxies: 3, postgresUrl: p.postgresUrl, log: p.log });
    try {
      // The rail takes a while to answer, so there is a window between intent commit and answer.
      await drill.setFaults([{ kind: FaultKind.LATENCY, latencyMs: 80, count: 0, clientReferencePrefix: "" }]);
      await drill.createPayouts(total, accounts, p.rng);
      for (let i = 0; i < 3; i++) await drill.addExecutor({ EXECUTOR_CONCURRENCY: "4", LEASE_TTL_MS: "3000" });

      let kills = 0;
      let killsMidCall = 0;
      const deadline = Date.now() + Math.max(60_000, total * 100);
      for (;;) {
        const open = await drill.query<{ n: number }>("SELECT count(*)::int AS n FROM payouts WHERE state IN ('PENDING', 'PROCESSING')").then((r) => r[0]!.n);
        if (open === 0 || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 100 + Math.floor(p.rng() * 200)));
        // Prefer (seeded) a replica with calls in flight: a kill between commit and answer is the point.
        const forwarding = await drill.query<{ replica_id: string; n: number }>("SELECT replica_id, count(*)::int AS n FROM rail_submissions WHERE state = 'FORWARDING' GROUP BY replica_id");
        const busy = drill.mesh.proxies.filter((x) => x.running && forwarding.some((f) => f.replica_id === x.opts.env.REPLICA_ID && f.n > 0));
        const candidates = busy.length > 0 && p.rng() < 0.8 ? busy : drill.mesh.proxies;
        const victim = candidates[Math.floor(p.rng() * candidates.length)]!;
        const inFlight = forwarding.find((f) => f.replica_id === victim.opts.env.REPLICA_ID)?.n ?? 0;
        victim.kill("SIGKILL");
        kills++;
        if (inFlight > 0) killsMidCall++;
        await new Promise((r) => setTimeout(r, 100 + Math.floor(p.rng() * 200)));
        await victim.restart();
      }
      notes.push(`${kills} replica kills, ${killsMidCall} with submissions between intent commit and rail answer`);
      if (killsMidCall === 0) failures.push("no kill landed between intent commit and rail answer");
      const open = await drill.waitSettled(30_000);
      if (open !== 0) failures.push(`${open} payouts did not settle`);
      for (const e of drill.mesh.executors) await e.stop();

      const before = await drill.check(true);
      const rec = await drill.reconcile();
      if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}`);
      const result = await drill.check(true);
      if (result.counts.ambiguousUnresolved > 0) failures.push(`${result.counts.ambiguousUnresolved} ambiguous submissions left unresolved`);
      notes.push(`ambiguous before reconciliation: ${before.counts.ambiguousUnresolved}; resolved paid ${result.counts.resolvedPaid}, not paid ${result.counts.resolvedNotPaid}`);
      return {
        verdict: guardedVerdict(result.violations, failures),
        violations: result.violations,
        counts: { ...result.counts, kills, killsMidCall, ambiguousBeforeReconcile: before.counts.ambiguousUnresolved },
        failures,
        notes,
      };
    } finally {
      await drill.stop();
    }
  },
};
