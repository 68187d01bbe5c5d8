/**
 * Test fixture: a Mesh on the run's shared PostgreSQL with databases unique to this mesh.
 * Always stop it in afterAll/afterEach (it stops every process it started, by pid).
 */
import { randomBytes } from "node:crypto";
import { inject } from "vitest";
import { Mesh, type MeshOptions } from "../../tools/harness/mesh.js";

export function uniqueSuffix(): string {
  return `_${randomBytes(5).toString("hex")}`;
}

export function testMesh(opts: MeshOptions = {}): Mesh {
  return new Mesh({
    postgresUrl: opts.postgres ? undefined : inject("pgUrl"),
    dbSuffix: uniqueSuffix(),
    ...opts,
  });
}

/**
 * Every component started, as `npm start` runs them: rail-stub and one rail-proxy (more with
 * `proxies`), lock, payouts, one executor, and with `reconciler` a long-running reconciler
 * passing every `reconcileIntervalMs`. Stop it in afterAll.
 */
export async function startFullMesh(opts: MeshOptions & { reconcileIntervalMs?: number } = {}): Promise<Mesh> {
  const { reconcileIntervalMs, ...meshOptions } = opts;
  const mesh = testMesh({ proxies: 1, ...meshOptions });
  await mesh.start();
  await mesh.startLock();
  await mesh.startPayouts();
  await mesh.addExecutor();
  if (reconcileIntervalMs !== undefined) await mesh.startReconciler({ RECONCILE_INTERVAL_MS: String(reconcileIntervalMs) });
  return mesh;
}
