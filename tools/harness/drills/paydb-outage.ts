/**
 * C5 §5.8 paydb outage: paydb's server is stopped mid-run and started again. While it is down,
 * money paths refuse (fail closed): nothing reaches the rail without an intent. Afterwards the
 * work resumes and nothing half-done is left unrecorded.
 */
import { DrillMesh } from "./drill-mesh.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

export const paydbOutage: Scenario = {
  name: "paydb-outage",
  summary: "paydb stopped mid-run: submissions fail closed, resume after, nothing half-done",
  async run(p: DrillParams) {
    const total = p.payouts ?? 80;
    const notes: string[] = [];
    const failures: string[] = [];
    const drill = await DrillMesh.start({ lockBackend: p.lockBackend, proxies: 2, ownServers: ["paydb"], postgresUrl: p.postgresUrl, log: p.log });
    try {
      await drill.createPayouts(total, ["acc-1", "acc-2", "acc-3", "acc-4", "acc-5"], p.rng);
      const callsBefore = Number((await drill.railControl().getFaults({})).submitCalls);
      for (let i = 0; i < 2; i++) await drill.addExecutor({ EXECUTOR_CONCURRENCY: "4" });
      await new Promise((r) => setTimeout(r, 300 + Math.floor(p.rng() * 300)));
      await drill.servers.paydb!.stop("immediate");
      const downAt = Number((await drill.railControl().getFaults({})).submitCalls);
      await new Promise((r) => setTimeout(r, 2000));
      const stillDown = Number((await drill.railControl().getFaults({})).submitCalls);
      // In-flight rail calls admitted before the stop may still arrive; nothing new may start.
      if (stillDown - downAt > 12) failures.push(`${stillDown - downAt} rail calls while paydb was down`);
      await drill.servers.paydb!.startProcess();
      notes.push(`paydb down for 2 s; rail calls before ${downAt - callsBefore}, during ${stillDown - downAt}`);
      const open = await drill.waitSettled(60_000);
      if (open !== 0) failures.push(`${open} payouts did not settle`);
      for (const e of drill.mesh.executors) await e.stop();
      const rec = await drill.reconcile();
      if (rec.code !== 0) failures.push(`reconciler exited ${rec.code}`);
      const result = await drill.check(true);
      const refusals = drill.mesh.proxies.flatMap((x) => x.lines).filter((l) => l.includes("PAYDB_UNAVAILABLE")).length;
      notes.push(`proxies refused ${refusals} calls with PAYDB_UNAVAILABLE`);
      return { verdict: guardedVerdict(result.violations, failures), violations: result.violations, counts: { ...result.counts, refusals }, failures, notes };
    } finally {
      await drill.stop();
    }
  },
};
