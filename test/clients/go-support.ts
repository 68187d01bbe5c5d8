/**
 * Running the Go module's tests (clients/go) from vitest: `go test -json` with the project-local
 * caches of tools/go-tools.ts, and a reading of its events that counts only tests that ran. A
 * skipped Go test proves nothing, so `expectPassed` fails on a skip exactly as on a failure.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { goBinary, goEnv } from "../../tools/go-tools.js";

const run = promisify(execFile);

export const GO_MODULE_DIR = join(projectRoot(), "clients", "go");

/** One line of `go test -json` (test2json). */
interface GoTestEvent {
  Action: string;
  Package?: string;
  Test?: string;
  Output?: string;
}

export interface GoTestRun {
  exitCode: number;
  /** Final action per test name: pass, fail or skip. */
  results: Map<string, string>;
  /** Everything the tests printed, for failure messages. */
  output: string;
  stderr: string;
  seconds: number;
}

/** `go test -json -count=1 <args>` in clients/go with env added; never throws on a test failure. */
export async function goTest(args: string[], env: Record<string, string> = {}): Promise<GoTestRun> {
  const started = Date.now();
  let stdout = "";
  let stderr = "";
  let exitCode = 0;
  try {
    ({ stdout, stderr } = await run(goBinary(), ["test", "-json", "-count=1", ...args], {
      cwd: GO_MODULE_DIR,
      env: goEnv(env),
      maxBuffer: 64 * 1024 * 1024,
      timeout: 10 * 60_000,
    }));
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    exitCode = typeof e.code === "number" ? e.code : -1;
    stdout = e.stdout ?? "";
    stderr = e.stderr ?? String(err);
  }
  const results = new Map<string, string>();
  let output = "";
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const ev = JSON.parse(line) as GoTestEvent;
    if (ev.Output) output += ev.Output;
    if (ev.Test && ["pass", "fail", "skip"].includes(ev.Action)) results.set(ev.Test, ev.Action);
  }
  return { exitCode, results, output, stderr, seconds: (Date.now() - started) / 1000 };
}

/** Names of tests that did not pass (skipped, failed or absent), with their outcome. */
export function notPassed(r: GoTestRun, names: readonly string[]): string[] {
  return names.filter((n) => r.results.get(n) !== "pass").map((n) => `${n}: ${r.results.get(n) ?? "did not run"}`);
}

/** Throws unless go test exited 0 and every named test ran and passed. */
export function expectPassed(r: GoTestRun, names: readonly string[]): void {
  const missing = notPassed(r, names);
  if (r.exitCode !== 0 || missing.length > 0) {
    throw new Error(`go test exit ${r.exitCode}; not passed: ${missing.join(", ") || "none"}\n${r.output}\n${r.stderr}`);
  }
}
