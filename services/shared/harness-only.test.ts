import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "./config.js";
import { HARNESS_ONLY_REFUSAL, inDevelopmentCheckout, refuseHarnessOnly, warnHarnessOnly } from "./harness-only.js";
import type { Logger } from "./logger.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The URL harness-only.js has in a build laid out under root (with or without the harness). */
function layout(withHarness: boolean): string {
  const root = mkdtempSync(join(tmpdir(), "harness-only-"));
  dirs.push(root);
  mkdirSync(join(root, "dist", "services", "shared"), { recursive: true });
  if (withHarness) mkdirSync(join(root, "dist", "tools", "harness"), { recursive: true });
  return pathToFileURL(join(root, "dist", "services", "shared", "harness-only.js")).href;
}

describe("harness-only settings", () => {
  it("recognises a development checkout by the harness built beside the services, and the image by its absence", () => {
    expect(inDevelopmentCheckout(layout(true))).toBe(true);
    expect(inDevelopmentCheckout(layout(false))).toBe(false);
    // This very file runs from the source tree, where tools/harness sits beside services/.
    expect(inDevelopmentCheckout()).toBe(true);
  });

  it("outside a checkout, refuses every setting that is on, each named, as a configuration error", () => {
    let caught: unknown;
    try {
      refuseHarnessOnly(["RAIL_PROXY_FENCING_ENABLED=false", false, undefined, "RAIL_PROXY_MARK_STORE=memory"], () => false);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).problems).toEqual([`RAIL_PROXY_FENCING_ENABLED=false: ${HARNESS_ONLY_REFUSAL}`, `RAIL_PROXY_MARK_STORE=memory: ${HARNESS_ONLY_REFUSAL}`]);
  });

  it("with nothing on, passes anywhere (the production values are not settings that are on)", () => {
    expect(refuseHarnessOnly([false, undefined], () => false)).toEqual([]);
  });

  it("inside a checkout, lets them through and they are announced as one warning", () => {
    const on = refuseHarnessOnly(["EXECUTOR_PAUSE_AFTER_FENCE_MS=5000", false], () => true);
    expect(on).toEqual(["EXECUTOR_PAUSE_AFTER_FENCE_MS=5000"]);
    const warned: unknown[][] = [];
    const logger = { warn: (...args: unknown[]) => warned.push(args) } as unknown as Logger;
    warnHarnessOnly(logger, on);
    warnHarnessOnly(logger, []);
    expect(warned).toHaveLength(1);
    expect(warned[0]![0]).toEqual({ event: "harness_only_settings", settings: ["EXECUTOR_PAUSE_AFTER_FENCE_MS=5000"] });
  });
});
