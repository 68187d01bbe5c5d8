/**
 * Harness-only settings (negative controls, the executor's pause point and attempt references)
 * cannot be switched on in the production image, and are loud where they are allowed
 * (services/shared/harness-only.ts, docs/decisions/015-harness-out-of-the-product.md).
 *
 * "The image" here is the product compiled exactly as the image compiles it
 * (`tsc -p tsconfig.image.json`) into a temporary folder laid out like the image's /app:
 * package.json, migrations, node_modules and dist/services, and no tools/harness beside them.
 * The same services compiled by `npm run build` in this checkout are the development side.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HARNESS_ONLY_REFUSAL } from "../../services/shared/harness-only.js";
import { projectRoot } from "../../services/shared/project-root.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { testMesh } from "../support/test-mesh.js";

const root = projectRoot();
let image: string;
let mesh: Mesh;

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
  // Databases and the rail stub only: the proxies and executors are started by each test.
  mesh = testMesh({ proxies: 0 });
  await mesh.start();
});

afterAll(async () => {
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

/** Runs service from root (the image layout or this checkout) until it exits; its code and log. */
async function runToExit(
  service: "rail-proxy" | "executor",
  root: string | undefined,
  env: Record<string, string>,
): Promise<{ code: number | null; proc: ServiceProcess }> {
  const proc = new ServiceProcess({ service, env, root, waitReady: false, readyTimeoutMs: 30_000 });
  await proc.start();
  const code = await Promise.race([proc.waitExit(), new Promise<"running">((r) => setTimeout(() => r("running"), 30_000))]);
  if (code === "running") {
    await proc.stop(2000);
    throw new Error(`${service} did not exit:\n${proc.lines.join("\n")}`);
  }
  return { code, proc };
}

function proxyEnv(extra: Record<string, string>): Record<string, string> {
  return { ...mesh.proxyEnv(90), LOG_LEVEL: "info", ...extra };
}

function executorEnv(extra: Record<string, string>): Record<string, string> {
  // Nothing to pay and no lock needed at start: the executor only polls paydb.
  return {
    METRICS_PORT: "0",
    PAYDB_URL: mesh.roleUrl("paydb", "executor"),
    LOCK_URL: "http://127.0.0.1:9",
    RAIL_PROXY_URLS: "http://127.0.0.1:9",
    EXECUTOR_ID: "harness-only-test",
    POLL_INTERVAL_MS: "200",
    ...extra,
  };
}

/** The problems a refused start named (the fatal startup_failed line). */
function refusal(proc: ServiceProcess): string {
  const fatal = events(proc).find((e) => e.event === "startup_failed");
  expect(fatal, proc.lines.join("\n")).toBeDefined();
  expect(fatal!.level).toBe("fatal");
  return String(fatal!.error);
}

const PROXY_SWITCHES: Array<[string, string]> = [
  ["RAIL_PROXY_FENCING_ENABLED", "false"],
  ["RAIL_PROXY_MARK_STORE", "memory"],
  ["RAIL_PROXY_DISABLED_GUARDS", "payout-binding,forward-budget"],
  ["RAIL_PROXY_HOLD_AFTER_BUDGET_CHECK_FILE", "/tmp/railfence-release"],
  ["RAIL_PROXY_HOLD_BEFORE_SEND_GATE_FILE", "/tmp/railfence-release-gate"],
  ["RAIL_PROXY_HIDE_HOLDS_FROM_MONOTONIC", "true"],
];
const EXECUTOR_SWITCHES: Array<[string, string]> = [
  ["EXECUTOR_PAUSE_AFTER_FENCE_MS", "5000"],
  ["EXECUTOR_SUBMISSION_REFERENCE", "attempt"],
  ["EXECUTOR_TRUST_NOT_FOUND", "true"],
];

describe("in the image, harness-only settings are refused", () => {
  it("the image layout holds no harness (the premise of everything below)", () => {
    expect(existsSync(join(image, "dist", "tools"))).toBe(false);
    expect(existsSync(join(image, "dist", "services", "rail-proxy", "main.js"))).toBe(true);
  });

  it.each(PROXY_SWITCHES)("rail-proxy with %s=%s exits 78 naming it, before reading the rail credential", async (name, value) => {
    // The credential file is missing: had the proxy got as far as reading it, that would be the error.
    const { code, proc } = await runToExit("rail-proxy", image, proxyEnv({ [name]: value, RAIL_CREDENTIALS_FILE: join(image, "no-such-credential") }));
    expect(code, proc.lines.join("\n")).toBe(78);
    const error = refusal(proc);
    expect(error).toBe(`invalid configuration:\n  - ${name}=${value}: ${HARNESS_ONLY_REFUSAL}`);
    expect(events(proc).some((e) => e.event === "ready")).toBe(false);
  });

  it("rail-proxy with every negative control at once names every one", async () => {
    const { code, proc } = await runToExit("rail-proxy", image, proxyEnv(Object.fromEntries(PROXY_SWITCHES)));
    expect(code).toBe(78);
    const error = refusal(proc);
    for (const [name, value] of PROXY_SWITCHES) expect(error).toContain(`${name}=${value}: ${HARNESS_ONLY_REFUSAL}`);
  });

  it.each(EXECUTOR_SWITCHES)("an executor with %s=%s exits 78 naming it", async (name, value) => {
    const { code, proc } = await runToExit("executor", image, executorEnv({ [name]: value }));
    expect(code, proc.lines.join("\n")).toBe(78);
    expect(refusal(proc)).toBe(`invalid configuration:\n  - ${name}=${value}: ${HARNESS_ONLY_REFUSAL}`);
  });

  it("the chart's literals (every guard on) and the production defaults start from the image, silently", async () => {
    const proxy = new ServiceProcess({
      service: "rail-proxy",
      root: image,
      env: proxyEnv({ RAIL_PROXY_FENCING_ENABLED: "true", RAIL_PROXY_MARK_STORE: "paydb", RAIL_PROXY_DISABLED_GUARDS: "" }),
    });
    const executor = new ServiceProcess({
      service: "executor",
      root: image,
      env: executorEnv({ EXECUTOR_PAUSE_AFTER_FENCE_MS: "0", EXECUTOR_SUBMISSION_REFERENCE: "payout" }),
    });
    try {
      await proxy.start();
      await executor.start();
      for (const p of [proxy, executor]) {
        expect(p.ready).toBeDefined();
        expect(events(p).filter((e) => e.level === "warn" && /harness_only_settings|fencing_disabled|pause_after_fence/.test(String(e.event)))).toEqual([]);
      }
    } finally {
      await Promise.all([proxy.stop(5000), executor.stop(5000)]);
    }
  });
});

describe("in a development checkout, they start and say so", () => {
  it("rail-proxy with every negative control starts and warns, naming each", async () => {
    const proxy = new ServiceProcess({ service: "rail-proxy", env: proxyEnv(Object.fromEntries(PROXY_SWITCHES)) });
    try {
      await proxy.start();
      const warning = events(proxy).find((e) => e.event === "harness_only_settings");
      expect(warning, proxy.lines.join("\n")).toMatchObject({ level: "warn", settings: PROXY_SWITCHES.map(([n, v]) => `${n}=${v}`) });
      // The guard-specific warnings (repeated every minute) are still there too.
      expect(events(proxy).filter((e) => e.event === "fencing_disabled").length).toBeGreaterThanOrEqual(3);
    } finally {
      await proxy.stop(5000);
    }
  });

  it("an executor with the pause point and attempt references starts and warns, naming each", async () => {
    const executor = new ServiceProcess({ service: "executor", env: executorEnv(Object.fromEntries(EXECUTOR_SWITCHES)) });
    try {
      await executor.start();
      const warning = events(executor).find((e) => e.event === "harness_only_settings");
      expect(warning, executor.lines.join("\n")).toMatchObject({ level: "warn", settings: EXECUTOR_SWITCHES.map(([n, v]) => `${n}=${v}`) });
    } finally {
      await executor.stop(5000);
    }
  });
});

it("docs/configuration.md documents the refusal word for word", () => {
  const readme = readFileSync(join(root, "docs", "configuration.md"), "utf8").replace(/\s+/g, " ");
  expect(readme).toContain(`RAIL_PROXY_MARK_STORE=memory: ${HARNESS_ONLY_REFUSAL}`);
});
