/** C4 §4.4 signals owned by the lock service. Labels are bounded: never a key or an owner. */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

export function createLockMetrics(registry: Registry, backend: string) {
  const registers = [registry];
  const metrics = {
    grants: new Counter({ name: "railfence_lock_grants_total", help: "Leases granted", labelNames: ["backend"] as const, registers }),
    contention: new Counter({
      name: "railfence_lock_contention_total",
      help: "Acquires refused with LOCK_HELD (still held when wait_ms ran out)",
      labelNames: ["backend"] as const,
      registers,
    }),
    leaseLost: new Counter({
      name: "railfence_lock_leases_lost_total",
      help: "Renewals refused with LEASE_LOST (expired, released or superseded)",
      labelNames: ["backend"] as const,
      registers,
    }),
    releases: new Counter({
      name: "railfence_lock_releases_total",
      help: "Release calls by outcome",
      labelNames: ["backend", "outcome"] as const,
      registers,
    }),
    backendErrors: new Counter({
      name: "railfence_lock_backend_errors_total",
      help: "Calls failed because the lock backend was unavailable",
      labelNames: ["backend", "op"] as const,
      registers,
    }),
    acquireSeconds: new Histogram({
      name: "railfence_lock_acquire_duration_seconds",
      help: "Acquire latency, waiting included",
      labelNames: ["backend", "result"] as const,
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    tokenFloor: new Gauge({
      name: "railfence_lock_token_floor",
      help: "Effective token floor (LOCK_TOKEN_FLOOR ratcheted)",
      labelNames: ["backend"] as const,
      registers,
    }),
  };
  // Zero every series up front so dashboards and alerts see 0, not "no data".
  metrics.grants.inc({ backend }, 0);
  metrics.contention.inc({ backend }, 0);
  metrics.leaseLost.inc({ backend }, 0);
  return metrics;
}

/** The pg backend's group commit (decision 070): calls per lockdb statement, by statement. */
export function createLockDbMetrics(registry: Registry) {
  const releases = new Counter({
    name: "railfence_lock_db_releases_total",
    help: "Releases committed in lockdb, by how: carried by a group of acquire attempts (sharing its commit), or alone (decision 074)",
    labelNames: ["committed"] as const,
    registers: [registry],
  });
  releases.inc({ committed: "carried" }, 0);
  releases.inc({ committed: "alone" }, 0);
  return {
    batchSize: new Histogram({
      name: "railfence_lock_db_batch_size",
      help: "Calls per lockdb statement (lock group commit, decision 070; 1 = alone)",
      labelNames: ["statement"] as const,
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers: [registry],
    }),
    releases,
  };
}

export type LockMetrics = ReturnType<typeof createLockMetrics>;
