/**
 * No setting removes a guard (decision 064). The product's services read none of the harness's
 * control variables: a proxy or executor started from the product's own main.js with every one of
 * them set runs as it ships, every guard on, silently. Only the harness's entries
 * (tools/harness/entries) build a service with a guard removed, as a dependency, and say so.
 *
 * "The image" is the product compiled exactly as the image compiles it (`tsc -p
 * tsconfig.image.json`) into a temporary folder laid out like the image's /app: package.json,
 * migrations, node_modules and dist/services, and no tools beside them. The same product from
 * this checkout's build is checked too: not being in the image is no longer what keeps them off.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubmissionState } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { CONTROL_VARIABLES } from "../../tools/harness/controls/variables.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { db, expectRejected, metricValue, proxyClient, railBookings } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";

const root = projectRoot();
let image: string;
let mesh: Mesh;
let paydb: pg.Client;
let raildb: pg.Client;
let seq = 0;
const uid = (p: string) => `${p}-${Date.now().toString(36)}-${++seq}`;

/** The product as the image builds it, in a folder of its own (no harness beside the services). */
function buildImageLayout(): string {
  const dir = mkdtempSync(join(tmpdir(), "railfence-image-layout-"));
  const r = spawnSync(
    process.execPath,
    [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(root, "tsconfig.image.json"), "--outDir", join(dir, "dist")],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`image build failed: ${r.stdout}${r.stderr}`);
  copyFileSync(join(root, "package.json"), join(dir, "package.json"));
  symlinkSync(join(root, "migrations"), join(dir, "migrations"));
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
  return dir;
}

beforeAll(async () => {
  image = buildImageLayout();
  // One honest proxy (it sets the mark the stale submissions meet); the others are per test.
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
  paydb = await db(mesh.dbUrl("paydb"));
  raildb = await db(mesh.databases.raildb);
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
  if (image) rmSync(image, { recursive: true, force: true });
});

/** Parsed JSON log lines of a process. */
function events(p: ServiceProcess): Array<Record<string, unknown>> {
  return p.lines.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

const HARNESS_WARNINGS = /harness_controls|fencing_disabled/;

const PROXY_CONTROLS: Record<string, string> = {
  RAIL_PROXY_FENCING_ENABLED: "false",
  RAIL_PROXY_MARK_STORE: "memory",
  RAIL_PROXY_DISABLED_GUARDS: "payout-binding,one-live,forward-budget,send-gate,connected-session,wall-clock",
  // Files that never appear: a process honouring either would stall every rail call for two minutes.
  RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE: "/nonexistent/railfence-release",
  RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE: "/nonexistent/railfence-release-gate",
  RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC: "true",
  RAIL_PROXY_OUTCOME_ONLY: "true",
};
const EXECUTOR_CONTROLS: Record<string, string> = {
  EXECUTOR_PAUSE_AFTER_FENCE_MS: "5000",
  EXECUTOR_SUBMISSION_REFERENCE: "attempt",
  EXECUTOR_TRUST_NOT_FOUND: "true",
  EXECUTOR_TRUST_ACCEPTED: "true",
};

function executorEnv(extra: Record<string, string>): Record<string, string> {
  // Nothing to pay and no lock needed at start: the executor only polls paydb.
  return {
    METRICS_PORT: "0",
    PAYDB_URL: mesh.roleUrl("paydb", "executor"),
    LOCK_URL: "http://127.0.0.1:9",
    RAIL_PROXY_URLS: "http://127.0.0.1:9",
    EXECUTOR_ID: "harness-controls-test",
    POLL_INTERVAL_MS: "200",
    ...extra,
  };
}

const GUARDS = ["mark", "payout_binding", "one_live", "forward_budget", "connected_session", "send_gate", "wall_clock"];

it("the control variables are the ones this test sets (a new one must be added here)", () => {
  expect(Object.keys(PROXY_CONTROLS).sort()).toEqual([...CONTROL_VARIABLES["rail-proxy"]!].sort());
  expect(Object.keys(EXECUTOR_CONTROLS).sort()).toEqual([...CONTROL_VARIABLES.executor!].sort());
});

it("the image layout holds no harness", () => {
  expect(existsSync(join(image, "dist", "tools"))).toBe(false);
  expect(existsSync(join(image, "dist", "services", "rail-proxy", "main.js"))).toBe(true);
});

describe.each([
  ["the image", () => image],
  ["this checkout's product build", () => root],
])("%s: every control variable set, the product runs as it ships", (_what, productRoot) => {
  it("rail-proxy: every guard on, no warning, a stale token FENCED_OUT and a fresh one paid (no planted stall)", async () => {
    // An explicit root runs that build's own main.js, never the harness's entry.
    const proxy = new ServiceProcess({ service: "rail-proxy", name: "rail-proxy-product", root: productRoot(), env: mesh.proxyEnv(90, PROXY_CONTROLS) });
    try {
      await proxy.start();
      expect(proxy.ready).toMatchObject({ fencing_enabled: true });
      for (const guard of GUARDS) expect(await metricValue(proxy.ready!.metricsPort, "railfence_rail_proxy_guard_enabled", `guard="${guard}"`), guard).toBe(1);
      expect(events(proxy).filter((e) => HARNESS_WARNINGS.test(String(e.event)))).toEqual([]);

      const acc = uid("acc");
      const request = (payoutId: string, token: bigint) => ({
        accountId: acc,
        payoutId,
        fencingToken: token,
        amount: { amountMinor: 700n, currency: "EUR" },
        beneficiary: "ben-7",
      });
      await proxyClient(mesh.proxies[0]!.url).submitPayout(await fencedFor(paydb, request(uid("p"), 90n)));
      const stale = uid("p");
      await expectRejected(proxyClient(proxy.url).submitPayout(await fencedFor(paydb, request(stale, 41n))), Code.Aborted, "FENCED_OUT");
      expect(await railBookings(raildb, stale)).toBe(0);
      const fresh = uid("p");
      const res = await proxyClient(proxy.url).submitPayout(await fencedFor(paydb, request(fresh, 95n)));
      expect(res.submission?.state).toBe(SubmissionState.ACCEPTED);
    } finally {
      await proxy.stop(5000);
    }
  });

  it("executor: starts without a word about controls", async () => {
    const executor = new ServiceProcess({ service: "executor", root: productRoot(), env: executorEnv(EXECUTOR_CONTROLS) });
    try {
      await executor.start();
      expect(executor.ready).toBeDefined();
      expect(events(executor).filter((e) => e.level === "warn" && HARNESS_WARNINGS.test(String(e.event)))).toEqual([]);
    } finally {
      await executor.stop(5000);
    }
  });
});

describe("the harness's entries build the service with the controls, and say so", () => {
  it("rail-proxy: every guard it removed reads 0, and the warning names every control", async () => {
    const proxy = await mesh.startSpareProxy("rail-proxy-controls", PROXY_CONTROLS);
    try {
      expect(proxy.ready).toMatchObject({ fencing_enabled: false });
      for (const guard of GUARDS) expect(await metricValue(proxy.ready!.metricsPort, "railfence_rail_proxy_guard_enabled", `guard="${guard}"`), guard).toBe(0);
      const warning = events(proxy).find((e) => e.event === "harness_controls");
      expect(warning, proxy.lines.join("\n")).toMatchObject({ level: "warn", planted: Object.entries(PROXY_CONTROLS).map(([n, v]) => `${n}=${v}`) });
      expect(events(proxy).filter((e) => e.event === "fencing_disabled").length).toBeGreaterThanOrEqual(GUARDS.length);
    } finally {
      await proxy.stop(5000);
    }
  });

  it("executor: the warning names every behaviour staged", async () => {
    const executor = new ServiceProcess({ service: "executor", env: executorEnv(EXECUTOR_CONTROLS) });
    try {
      await executor.start();
      const warning = events(executor).find((e) => e.event === "harness_controls");
      expect(warning, executor.lines.join("\n")).toMatchObject({ level: "warn", planted: Object.entries(EXECUTOR_CONTROLS).map(([n, v]) => `${n}=${v}`) });
    } finally {
      await executor.stop(5000);
    }
  });
});
