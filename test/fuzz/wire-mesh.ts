/**
 * The mesh the raw-wire suites run against: every server (rail-proxy, payouts, lock, rail-stub
 * and its control API) with a short server read timeout, plus the "nothing changed" evidence:
 * paydb, raildb, lockdb and the rail stub's fault plan before and after.
 */
import { expect } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { checkInvariants, meshCheckTarget } from "../../tools/harness/invariants.js";
import { RailControlService } from "../../services/shared/gen/railfence/railcontrol/v1/rail_control_pb.js";
import { testMesh } from "../support/test-mesh.js";
import { ClientPool, expectServing } from "./fuzz-clients.js";
import { lockdbState, paydbState, raildbState } from "./state.js";
import type { WireTarget } from "./wire-targets.js";

/** READ_TIMEOUT_MS of every server in this mesh: short, so stalled-body cases finish quickly. */
export const SERVER_READ_TIMEOUT_MS = 1500;

export async function startWireMesh(): Promise<Mesh> {
  const env = { READ_TIMEOUT_MS: String(SERVER_READ_TIMEOUT_MS) };
  const mesh = testMesh({ proxies: 1, proxyEnv: env, lockEnv: env, railStubEnv: env });
  await mesh.start();
  await mesh.startLock();
  await mesh.startPayouts(env);
  return mesh;
}

/** Everything a hostile request could have changed, read from the stores and the stub. */
export async function meshState(mesh: Mesh): Promise<Record<string, unknown>> {
  const pool = new ClientPool();
  try {
    const control = pool.client(RailControlService, `http://127.0.0.1:${mesh.railStub.ready!.controlPort}`, "grpc");
    const faults = await control.getFaults({});
    return {
      paydb: await paydbState(mesh.dbUrl("paydb")),
      raildb: await raildbState(mesh.databases.raildb),
      lockdb: await lockdbState(mesh.dbUrl("lockdb")),
      faultRules: faults.rules.length,
    };
  } finally {
    pool.close();
  }
}

/** The verdict after a hostile run: all SERVING, nothing changed, no invariant broken, no internal error logged. */
export async function expectUnharmed(mesh: Mesh, targets: WireTarget[], before: Record<string, unknown>): Promise<void> {
  for (const t of targets) await expectServing(t.url());
  expect(await meshState(mesh)).toEqual(before);
  const check = await checkInvariants(meshCheckTarget(mesh));
  expect(check.violations).toEqual([]);
  for (const p of mesh.processes()) expect(p.running, p.name).toBe(true);
  expect(mesh.allLines().filter((l) => l.includes('"level":"error"') || l.includes('"level":"fatal"'))).toEqual([]);
}
