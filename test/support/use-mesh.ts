/**
 * The mesh fixture of a test file. `const t = useMesh({ proxies: 1 })` at the top of a file
 * registers the file's beforeAll (start the mesh's core, then `then(mesh)` for what the file adds:
 * the lock, payouts, executors) and afterAll (close every pool it handed out, then stop the mesh:
 * every process it started, by pid). Pools are opened on first use and shared within the file.
 *
 *   const t = useMesh({ proxies: 1, proxyEnv: TIMING });
 *   it("...", async () => { await t.paydb.query(...); proxyClient(t.mesh.proxies[0]!.url) ... });
 */
import type pg from "pg";
import { afterAll, beforeAll } from "vitest";
import type { DatabaseKind } from "../../services/shared/db/migrate.js";
import type { ServiceRole } from "../../services/shared/db/db-roles.js";
import type { Mesh, MeshOptions } from "../../tools/harness/mesh.js";
import { poolFor } from "../executor/support.js";
import { testMesh } from "./test-mesh.js";

export interface MeshFixture {
  /** The started mesh (only inside tests and hooks: it exists after the file's beforeAll). */
  readonly mesh: Mesh;
  /** paydb as its owner. */
  readonly paydb: pg.Pool;
  /** The rail stub's ledger as its owner (what the rail really booked). */
  readonly raildb: pg.Pool;
  /** A database logged in as one service's role (what that service may do, and no more). */
  roleDb(kind: DatabaseKind, role: ServiceRole): pg.Pool;
}

export interface UseMeshOptions extends MeshOptions {
  /** Started after the mesh's core, in the same beforeAll (lock, payouts, executors, ...). */
  then?: (mesh: Mesh) => Promise<void>;
  /** beforeAll's timeout (default 120 s: a mesh with TLS and several processes on a busy machine). */
  startTimeoutMs?: number;
}

export function useMesh(options: UseMeshOptions = {}): MeshFixture {
  const { then, startTimeoutMs = 120_000, ...meshOptions } = options;
  let mesh: Mesh | undefined;
  const pools = new Map<string, pg.Pool>();
  const pool = (url: string) => {
    let p = pools.get(url);
    if (!p) pools.set(url, (p = poolFor(url)));
    return p;
  };
  const started = () => {
    if (!mesh) throw new Error("useMesh: the mesh is used before the file's beforeAll started it");
    return mesh;
  };

  beforeAll(async () => {
    mesh = testMesh(meshOptions);
    await mesh.start();
    await then?.(mesh);
  }, startTimeoutMs);

  afterAll(async () => {
    await Promise.all([...pools.values()].map((p) => p.end()));
    pools.clear();
    await mesh?.stop();
  });

  return {
    get mesh() {
      return started();
    },
    get paydb() {
      return pool(started().dbUrl("paydb"));
    },
    get raildb() {
      return pool(started().dbUrl("raildb"));
    },
    roleDb: (kind, role) => pool(started().roleUrl(kind, role)),
  };
}
