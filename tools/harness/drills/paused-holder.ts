/**
 * C5 §5.1 paused holder, and its variants §5.2 (fencing off), §5.4 (restart amnesia),
 * §5.5 (two replicas), §5.6 (stale read) and §5.9 (lock-backend outage).
 *
 * Executor A takes the account lock, fences payout P1, passes its last lease renewal and is
 * SIGSTOPped right before SubmitPayout (the GC-pause window). Its lease expires; executor B
 * takes the account with a higher token and pays another payout of the account, P2. A is
 * SIGCONTed and submits P1 with its stale token.
 *
 * B never touches P1 (the drill holds P1's claim for A meanwhile), so P1 is fenced by A's own
 * token, has no other submission, and the proxy's payout binding and one-live guard both let it
 * through: only the high-water mark stands between the stale holder and the rail. With it, A's
 * submission is FENCED_OUT. Without it (fencing off, or the in-memory mark after a restart or on
 * the replica that never saw B's token) A is admitted out of order, and the checker must find the
 * admission that did not advance the account's mark (FENCE_ADVANCED).
 */
import { DrillMesh, UNTRUSTED_EXECUTOR_ENV } from "./drill-mesh.js";
import { guardedVerdict, type DrillParams, type Scenario } from "./scenario.js";

export interface PausedHolderVariant {
  name: string;
  summary: string;
  fencingEnabled: boolean;
  /** Restart every proxy while A is stopped (ADR-007 failure i). */
  restartProxies?: boolean;
  /** A talks only to replica 2, B only to replica 1 (failure ii). */
  splitReplicas?: boolean;
  /** A streaming standby of paydb exists; a proxy pointed at it must refuse to start (failure iii). */
  standby?: boolean;
  /** Stop the lock backend before A resumes (§5.9). */
  lockOutage?: boolean;
  /** Negative control: proxies keep marks in memory (ADR-007's rejected design). */
  memoryMarks?: boolean;
}

const LEASE_TTL_MS = 800;

export function pausedHolder(v: PausedHolderVariant): Scenario {
  return {
    name: v.name,
    summary: v.summary,
    expectsCorruption: !v.fencingEnabled || !!v.memoryMarks,
    caughtBy: "FENCE_ADVANCED",
    async run(p: DrillParams) {
      const notes: string[] = [];
      const failures: string[] = [];
      const drill = await DrillMesh.start({
        lockBackend: p.lockBackend,
        proxies: 2,
        proxyEnv: { RAIL_PROXY_FENCING_ENABLED: String(v.fencingEnabled), RAIL_PROXY_MARK_STORE: v.memoryMarks ? "memory" : "paydb" },
        ownServers: v.standby ? ["paydb"] : v.lockOutage && p.lockBackend === "pg" ? ["lockdb"] : [],
        postgresUrl: p.postgresUrl,
        log: p.log,
      });
      try {
        if (v.standby) {
          const standby = await drill.servers.paydb!.makeStandby();
          try {
            const { ServiceProcess } = await import("../service-process.js");
            const dbName = drill.paydbUrl.split("/").pop()!;
            const stale = new ServiceProcess({ service: "rail-proxy", name: "rail-proxy-standby", env: { ...drill.mesh.proxyEnv(9), PAYDB_URL: standby.url(dbName) } });
            const refused = await stale.start().then(
              () => false,
              () => true,
            );
            if (!refused) {
              failures.push("a rail-proxy started against a paydb standby");
              await stale.stop();
            } else notes.push(`proxy against the standby refused to start (exit ${stale.lastExit?.code})`);
          } finally {
            await standby.destroy();
          }
          // The primary restarted under the running proxies; give their pools a moment.
          await new Promise((r) => setTimeout(r, 300));
        }

        const [payoutId] = await drill.createPayouts(1, ["acc-contended"], p.rng);
        const proxyUrls = drill.mesh.proxies.map((x) => x.url);
        if (!payoutId) throw new Error("no payout created");
        const a = await drill.addExecutor({
          EXECUTOR_ID: "executor-A",
          LEASE_TTL_MS: String(LEASE_TTL_MS),
          EXECUTOR_CONCURRENCY: "1",
          EXECUTOR_PAUSE_AFTER_FENCE_MS: "5000",
          ...(v.splitReplicas ? { RAIL_PROXY_URLS: proxyUrls[1]! } : {}),
        });
        const fenced = await drill.waitEvent(a.name, "fenced", (e) => e.payout_id === payoutId);
        a.pause(); // SIGSTOP inside the window between the last renewal and SubmitPayout
        notes.push(`A fenced ${payoutId} with token ${fenced.fencing_token} and was SIGSTOPped`);
        // B is busy elsewhere: P1 stays A's (its claim is held), so B takes the account for P2.
        await drill.holdClaim(payoutId);
        const [otherId] = await drill.createPayouts(1, ["acc-contended"], p.rng);
        // Let A's lease lapse.
        await new Promise((r) => setTimeout(r, LEASE_TTL_MS + 300));

        const b = await drill.addExecutor({ EXECUTOR_ID: "executor-B", LEASE_TTL_MS: "5000", ...(v.splitReplicas ? { RAIL_PROXY_URLS: proxyUrls[0]! } : {}) });
        const paidByB = await drill.waitEvent(b.name, "payout_attempt", (e) => e.payout_id === otherId && e.outcome === "PAID", 20_000).catch(() => undefined);
        if (!paidByB) failures.push("B did not pay the account's other payout after A's lease expired");
        else notes.push(`B paid ${otherId} of the same account with token ${paidByB.fencing_token}`);

        if (v.restartProxies) {
          for (const proxy of drill.mesh.proxies) await proxy.restart();
          notes.push("every rail-proxy was SIGKILLed and restarted while A was stopped");
        }
        if (v.lockOutage) {
          if (drill.etcd) await drill.etcd.stop();
          else await drill.servers.lockdb!.stop("immediate");
          notes.push(`the lock backend (${p.lockBackend}) was stopped before A resumed`);
        }

        a.resume();
        const aOutcome = await drill.waitEvent(a.name, "payout_attempt", (e) => e.payout_id === payoutId, 20_000).catch(() => undefined);
        notes.push(`A resumed: ${aOutcome ? `${aOutcome.outcome}${aOutcome.where ? ` (${aOutcome.where})` : ""}` : "no outcome logged"}`);
        const guarded = v.fencingEnabled && !v.memoryMarks;
        if (guarded && !(aOutcome?.outcome === "FENCED_OUT" && aOutcome.where === "proxy")) {
          failures.push("A's stale submission was not FENCED_OUT by the proxy");
        }

        // A pauses on every payout it takes: it has made its point; B carries the background load
        // (and pays P1 if A's stale attempt was refused).
        await a.stop();
        await drill.releaseClaim(payoutId);
        if (v.lockOutage) {
          if (drill.etcd) await drill.etcd.restart();
          else await drill.servers.lockdb!.startProcess();
        }
        // Background load on other accounts, paid by both executors.
        const load = p.payouts ?? 20;
        if (load > 0) await drill.createPayouts(load, ["acc-1", "acc-2", "acc-3", "acc-4"], p.rng);
        const open = await drill.waitSettled(60_000);
        if (open !== 0) failures.push(`${open} payouts did not settle`);
        await drill.mesh.executors.reduce((prev, e) => prev.then(() => e.stop().then(() => {})), Promise.resolve());
        const result = await drill.check(true);
        const corruption = result.violations.some((x) => x.invariant === "FENCE_ADVANCED");
        const fencedOut = drill.mesh.executors.flatMap((e) => drill.events(e.name, "payout_attempt")).filter((e) => e.outcome === "FENCED_OUT" && e.where === "proxy").length;
        return {
          verdict: guarded ? guardedVerdict(result.violations, failures) : corruption ? "CORRUPTION_DETECTED" : "FAIL",
          violations: result.violations,
          counts: { ...result.counts, fencedOut },
          failures: guarded ? failures : corruption ? [] : ["the guard was removed but the checker found no out-of-order admission"],
          notes,
        };
      } finally {
        await drill.stop();
      }
    },
  };
}
