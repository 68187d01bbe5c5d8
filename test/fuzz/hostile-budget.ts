/**
 * `npm run hostile -- [--cases N] [--seed S|random]`: the property-based hostile suite
 * (test/fuzz, every service, gRPC, Connect and raw HTTP/2) scaled to run about N cases in one go,
 * then a report of what went wrong, by kind:
 *   crash         a service process died or stopped answering health (SERVING) checks
 *   hang          a property or call did not finish within its (scaled) timeout
 *   state change  paydb, raildb, lockdb or the rail's fault plan changed under requests that
 *                 must change nothing, or the invariant audit found a violation
 *   wrong answer  any other failed assertion (a wrong code, a missing ErrorInfo, leaked text)
 * The seed is printed; replay a failure with the same --seed and --cases.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { recordResult } from "../../tools/harness/results-log.js";

const { values } = parseArgs({ options: { cases: { type: "string" }, seed: { type: "string" } } });
const target = Number(values.cases ?? 100_000);
if (!Number.isInteger(target) || target < 1) throw new Error("--cases must be a positive integer");
const seed = values.seed === undefined || values.seed === "random" ? String(Math.floor(Math.random() * 2 ** 31)) : values.seed;

const root = projectRoot();
const reports = join(root, "reports");
const summaryFile = join(reports, "fuzz-summary.json");
const outDir = join(reports, "hostile");

/** Cases one run at scale 1 makes (from the last `npm test`'s tally; a measured default otherwise). */
function baselineCases(): number {
  try {
    const s = JSON.parse(readFileSync(summaryFile, "utf8")) as { total_cases: number; scale?: number };
    // A tally without its scale is from an older run whose size is unknown: not a baseline.
    if (s.total_cases > 0 && s.scale !== undefined) return s.total_cases / s.scale;
  } catch {
    // no run yet
  }
  // Measured: 74,458 cases at scale 27 (a large run makes fewer cases per unit of scale than
  // `npm test`'s, as some properties are capped).
  return 2750;
}

const scale = Math.max(1, target / baselineCases());
mkdirSync(outDir, { recursive: true });
rmSync(join(reports, "fuzz"), { recursive: true, force: true });
const started = Date.now();
console.log(`hostile budget: about ${target} cases (scale ${scale.toFixed(1)} of the suite), seed ${seed} (replay: --seed ${seed} --cases ${target})`);
const vitestJson = join(outDir, "vitest.json");
const run = spawnSync(
  process.execPath,
  [
    join(root, "node_modules", "vitest", "vitest.mjs"),
    "run",
    "test/fuzz",
    "--exclude",
    "test/fuzz/secret-hygiene.test.ts",
    "--reporter=default",
    "--reporter=json",
    `--outputFile=${vitestJson}`,
    `--testTimeout=${Math.round(120_000 * scale)}`,
    `--hookTimeout=${Math.round(120_000 * scale)}`,
  ],
  { cwd: root, stdio: "inherit", env: { ...process.env, FUZZ_SCALE: String(scale), FUZZ_SEED: seed } },
);
const seconds = (Date.now() - started) / 1000;

interface Assertion {
  fullName: string;
  status: string;
  failureMessages: string[];
}
let assertions: Assertion[] = [];
let brokenFiles: string[] = [];
try {
  const r = JSON.parse(readFileSync(vitestJson, "utf8")) as {
    testResults: Array<{ name: string; status: string; message?: string; assertionResults: Assertion[] }>;
  };
  assertions = r.testResults.flatMap((f) => f.assertionResults);
  brokenFiles = r.testResults.filter((f) => f.status === "failed" && f.assertionResults.length === 0).map((f) => `${f.name}: ${f.message ?? ""}`);
} catch {
  brokenFiles = ["vitest wrote no report"];
}
let cases = 0;
try {
  cases = (JSON.parse(readFileSync(summaryFile, "utf8")) as { total_cases: number }).total_cases;
  writeFileSync(summaryFile, JSON.stringify({ ...JSON.parse(readFileSync(summaryFile, "utf8")), scale }, null, 2));
} catch {
  // reported below as 0
}

/** What a failed property says happened. */
function kind(message: string): "crash" | "hang" | "state change" | "wrong answer" {
  if (/timed out|Timeout|did not (finish|answer|end)|stall/i.test(message)) return "hang";
  if (/SERVING|exited|not running|ECONNREFUSED|socket hang up|GOAWAY/i.test(message)) return "crash";
  if (/toEqual\(before\)|changed|violations|invariant/i.test(message)) return "state change";
  return "wrong answer";
}
const failed = assertions
  .filter((a) => a.status === "failed")
  .map((a) => ({ name: a.fullName, kind: kind(a.failureMessages.join("\n")), message: a.failureMessages[0]?.split("\n").slice(0, 4).join(" ") ?? "" }));
const byKind = { crash: 0, hang: 0, "state change": 0, "wrong answer": 0 } as Record<string, number>;
for (const f of failed) byKind[f.kind]! += 1;
const report = {
  seed,
  target_cases: target,
  cases_run: cases,
  scale,
  seconds: Math.round(seconds),
  cases_per_second: Math.round(cases / seconds),
  properties: assertions.length,
  failed: failed.length + brokenFiles.length,
  by_kind: byKind,
  failures: failed,
  broken_files: brokenFiles,
};
writeFileSync(join(outDir, "summary.json"), JSON.stringify(report, null, 2));
const lines = [
  `| seed | cases | time | cases/s | properties | crashes | hangs | state changes | wrong answers |`,
  `|---|---|---|---|---|---|---|---|---|`,
  `| ${seed} | ${cases} | ${(seconds / 60).toFixed(1)} min | ${report.cases_per_second} | ${assertions.length} | ${byKind.crash} | ${byKind.hang} | ${byKind["state change"]} | ${byKind["wrong answer"]} |`,
  ...failed.map((f) => `- ${f.kind}: ${f.name}: ${f.message}`),
  ...brokenFiles.map((f) => `- broken file: ${f}`),
];
writeFileSync(join(outDir, "summary.md"), `${lines.join("\n")}\n`);
recordResult(
  "hostile",
  `seed ${seed}: ${cases} cases of ${assertions.length} properties in ${(seconds / 60).toFixed(1)} min; crashes ${byKind.crash}, hangs ${byKind.hang}, state changes ${byKind["state change"]}, wrong answers ${byKind["wrong answer"]}${brokenFiles.length ? `, ${brokenFiles.length} broken files` : ""}`,
);
console.log(`\n${lines.join("\n")}\n\nwritten: ${outDir}/summary.{json,md}`);
// The scale is estimated from the last tally: say so when the run fell short of what was asked.
if (cases < target) console.log(`ran ${cases} of the ${target} cases asked for (the next run sizes itself from this one's tally)`);
process.exit(run.status === 0 && report.failed === 0 && cases > 0 ? 0 : 1);
