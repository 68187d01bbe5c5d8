/**
 * C5 §5.3 replica kill: continuous load while random rail-proxy replicas are SIGKILLed and
 * restarted. The rail answers after a small latency so that kills land between intent commit
 * and rail answer; those submissions become ambiguous and are closed by the reconciler against
 * the rail's statement, never by resubmission.
 */
import { FaultKind } from "../../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { DrillMesh } from "./drill-mesh.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

/** Kills that must find a submission between intent commit and rail answer before the load may stop growing. */
const MIN_MID_CALL_KILLS = 2;

/** Running replicas with a submission FORWARDING, polled briefly (a call's window is ~the rail's latency). */
async function busyReplicas(drill: DrillMesh, waitMs: number) {
  const until = Date.now() + waitMs;
  for (;;) {
    const forwarding = await drill.query<{ replica_id: string }>("SELECT DISTINCT replica_id FROM rail_submissions WHERE state = 'FORWARDING'");
    const busy = drill.mesh.proxies.filter((x) => x.running && forwarding.some((f) => f.replica_id === x.opts.env.REPLICA_ID));
    if (busy.length > 0 || Date.now() > until) return busy;
    await new Promise((r) => setTimeout(r, 15));
  }
}

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
      let created = total;
      const leftByKills = new Set<string>();
      const deadline = Date.now() + Math.max(60_000, total * 100);
      for (;;) {
        const open = await drill.query<{ n: number }>("SELECT count(*)::int AS n FROM payouts WHERE state IN ('PENDING', 'PROCESSING')").then((r) => r[0]!.n);
        // A fast mesh can pay a small load before a kill lands mid-call: top the load up (up to
        // three times the asked size) until one has, instead of reporting a drill that proved nothing.
        if (open < 12 && killsMidCall < MIN_MID_CALL_KILLS && created < 3 * total && Date.now() < deadline) {
          const more = Math.max(20, Math.round(total / 4));
          await drill.createPayouts(more, accounts, p.rng);
          created += more;
          continue;
        }
        if (open === 0 || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 100 + Math.floor(p.rng() * 200)));
        // Prefer (seeded) a replica with calls in flight: a kill between commit and answer is the point.
        const busy = await busyReplicas(drill, 1_000);
        const candidates = busy.length > 0 && p.rng() < 0.8 ? busy : drill.mesh.proxies.filter((x) => x.running);
        if (candidates.length === 0) continue;
        const victim = candidates[Math.floor(p.rng() * candidates.length)]!;
        const exited = victim.waitExit();
        victim.kill("SIGKILL");
        await exited;
        kills++;
        // Counted after the kill: what the dead replica left FORWARDING is exactly what it had
        // between intent commit and rail answer (nothing else writes those rows until a reconcile).
        const left = await drill.query<{ payout_id: string }>("SELECT payout_id FROM rail_submissions WHERE state = 'FORWARDING' AND replica_id = $1", [
          victim.opts.env.REPLICA_ID,
        ]);
        // Rows an earlier kill of this replica left behind stay FORWARDING until the sweeper: not this kill's.
        const fresh = left.filter((r) => !leftByKills.has(r.payout_id));
        for (const r of fresh) leftByKills.add(r.payout_id);
        if (fresh.length > 0) killsMidCall++;
        await new Promise((r) => setTimeout(r, 100 + Math.floor(p.rng() * 200)));
        await victim.restart();
      }
      if (created > total) notes.push(`load topped up to ${created} payouts so that a kill landed mid-call`);
      notes.push(`${kills} replica kills, ${killsMidCall} with submissions between intent commit and rail answer`);
      if (killsMidCall === 0) failures.push("no kill landed between intent commit and rail answer");
      const open = await drill.waitSettled(30_000);
      if (open !== 0) failures.push(`${open} payouts did not settle`);
      for (const e of drill.mesh.executors) await e.stop();

      const before = await drill.check(true);
      const rec = await drill.reconcile();
      if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}`);
      const result = await drill.check(true);
      const fates = await drill.query<{ fate: string; n: number }>(
        "SELECT coalesce(ambiguity_cause, '-') || ' -> ' || state AS fate, count(*)::int AS n FROM rail_submissions WHERE payout_id = ANY($1) GROUP BY 1 ORDER BY 1",
        [[...leftByKills]],
      );
      const unresolved = fates.filter((f) => !f.fate.endsWith("RESOLVED_PAID") && !f.fate.endsWith("RESOLVED_NOT_PAID")).reduce((a, f) => a + f.n, 0);
      if (unresolved > 0) failures.push(`${unresolved} submissions a kill left FORWARDING were not resolved against the rail's statement`);
      notes.push(`${leftByKills.size} submissions left FORWARDING by killed replicas: ${fates.map((f) => `${f.fate} ${f.n}`).join(", ") || "none"}`);
      if (result.counts.ambiguousUnresolved > 0) failures.push(`${result.counts.ambiguousUnresolved} ambiguous submissions left unresolved`);
      notes.push(
        `ambiguous before reconciliation: ${before.counts.ambiguousUnresolved}; resolved paid ${result.counts.resolvedPaid}, not paid ${result.counts.resolvedNotPaid}`,
      );
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
