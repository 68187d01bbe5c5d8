/**
 * Harness-only settings: the negative controls that remove a guard (RAIL_PROXY_FENCING_ENABLED=false,
 * RAIL_PROXY_MARK_STORE=memory, RAIL_PROXY_DISABLED_GUARDS) and the executor's pause point and
 * worst-case references (EXECUTOR_PAUSE_AFTER_FENCE_MS, EXECUTOR_SUBMISSION_REFERENCE=attempt).
 * They exist so drills and tests can show that a guard matters; in production each would be a
 * silent hole. So a service refuses them (a ConfigError: exit 78, naming each one) unless it runs
 * from a development checkout, recognised by the development harness sitting beside the services:
 * `tools/harness` next to `services/` in the source tree, `dist/tools/harness` next to
 * `dist/services` once built. The production image compiles tsconfig.image.json (no harness) from
 * a build context without tools/, so there these settings cannot be switched on at all; where they
 * are allowed, the service says so loudly at start (warnHarnessOnly). docs/decisions/015.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ConfigError } from "./config.js";
import type { Logger } from "./logger.js";

/** The development harness, relative to the project root (and to dist/ once compiled). */
export const HARNESS_FOLDER = "tools/harness";

/** The refusal, after "NAME=value: " (README, Configuration, documents this wording). */
export const HARNESS_ONLY_REFUSAL = `harness only, refused outside a development checkout (no ${HARNESS_FOLDER} beside the compiled services, as in the production image)`;

/**
 * True when the development harness was built beside these services. moduleUrl is this module's
 * own URL (services/shared/harness-only.{ts,js}), so the answer depends on the files the process
 * runs from, never on its working directory or environment.
 */
export function inDevelopmentCheckout(moduleUrl: string = import.meta.url): boolean {
  return existsSync(fileURLToPath(new URL(`../../${HARNESS_FOLDER}/`, moduleUrl)));
}

/**
 * Checks the harness-only settings that are on, each as "NAME=value" (false or undefined when
 * off). Outside a development checkout any of them is a ConfigError listing every one; inside,
 * they are returned so the caller can announce them.
 */
export function refuseHarnessOnly(settings: ReadonlyArray<string | false | undefined>, developmentCheckout: () => boolean = inDevelopmentCheckout): readonly string[] {
  const on = settings.filter((s): s is string => typeof s === "string" && s.length > 0);
  if (on.length > 0 && !developmentCheckout()) throw new ConfigError(on.map((s) => `${s}: ${HARNESS_ONLY_REFUSAL}`));
  return Object.freeze(on);
}

/** One warning at start naming every harness-only setting that is on (nothing when none is). */
export function warnHarnessOnly(logger: Logger, settings: ReadonlyArray<string | false | undefined>): void {
  const on = settings.filter((s): s is string => typeof s === "string" && s.length > 0);
  if (on.length === 0) return;
  logger.warn({ event: "harness_only_settings", settings: on }, `harness-only settings are on (${on.join(", ")}): a drill or test process, never production`);
}
