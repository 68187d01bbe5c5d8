/**
 * `npm run drill -- <scenario|all> [--lock-backend pg|etcd] [--payouts N] [--kills N] [--seed S] [--json] [--verbose]`
 * `npm run drill -- soak [--payouts N] [--minutes M] [--disable-guard mark|payout-binding|one-live|forward-budget] ...`
 *
 * Runs C5 scenarios against real processes, prints the verdict, writes a markdown report under
 * reports/drills/, and with --json prints one JSON object as the last line of stdout. Exit code
 * 0 when every scenario met its expectation (PASS, or CORRUPTION_DETECTED for a negative control),
 * 1 otherwise. A scenario tied to one backend (etcd-quorum) runs there when named alone, and
 * `all` skips it on the other backend with a line saying so. The seed is printed so a failing drill can be replayed. Every process's log lines
 * and every nemesis event go to reports/drills/<scenario>-<backend>-<seed>.log (stderr as well
 * with --verbose): a failed run can be explained from its own evidence.
 */
import { createWriteStream, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { scenario, SCENARIOS } from "./drills/catalogue.js";
import { SOAK_DEFAULTS, SOAK_GUARDS, soak, type SoakGuard } from "./drills/soak.js";
import { combinedTable, markdownReport, runScenario } from "./drills/run.js";
import { runsOn, type DrillResult } from "./drills/scenario.js";
import { recordResult } from "./results-log.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "lock-backend": { type: "string" },
    payouts: { type: "string" },
    kills: { type: "string" },
    seed: { type: "string" },
    json: { type: "boolean", default: false },
    verbose: { type: "boolean", default: false },
    minutes: { type: "string" },
    accounts: { type: "string" },
    "disable-guard": { type: "string" },
  },
});

const name = positionals[0];
if (!name) {
  console.error(`usage: npm run drill -- <scenario|all> [--lock-backend pg|etcd] [--payouts N] [--seed S] [--json]\nscenarios:`);
  for (const s of SCENARIOS) console.error(`  ${s.name.padEnd(16)} ${s.summary}`);
  console.error(`  ${"soak".padEnd(16)} ${SOAK_DEFAULTS.payouts} payouts, combined nemesis, both backends (--payouts, --minutes, --accounts, --disable-guard)`);
  process.exit(2);
}
const backend = values["lock-backend"];
if (backend !== undefined && backend !== "pg" && backend !== "etcd") {
  console.error("--lock-backend must be pg or etcd");
  process.exit(2);
}
const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const payouts = values.payouts !== undefined ? Number(values.payouts) : undefined;
const kills = values.kills !== undefined ? Number(values.kills) : undefined;
const guard = values["disable-guard"];
if (guard !== undefined && !(SOAK_GUARDS as readonly string[]).includes(guard)) {
  console.error(`--disable-guard must be one of ${SOAK_GUARDS.join(", ")}`);
  process.exit(2);
}
const scenarios =
  name === "all"
    ? SCENARIOS
    : name === "soak"
      ? [
          soak({
            payouts: payouts ?? SOAK_DEFAULTS.payouts,
            minutes: values.minutes !== undefined ? Number(values.minutes) : SOAK_DEFAULTS.minutes,
            accounts: values.accounts !== undefined ? Number(values.accounts) : SOAK_DEFAULTS.accounts,
            disabledGuard: guard as SoakGuard | undefined,
          }),
        ]
      : [scenario(name)];
// A scenario named alone runs on its own backend when it has only one (etcd-quorum: etcd).
const only = scenarios.length === 1 && scenarios[0]!.backends?.length === 1 ? scenarios[0]!.backends[0]! : undefined;
const backends: Array<"pg" | "etcd"> = backend ? [backend] : name === "all" || name === "soak" ? ["pg", "etcd"] : [only ?? "pg"];
if (name !== "all" && scenarios.some((s) => backends.some((b) => !runsOn(s, b)))) {
  console.error(`${name} runs only on the ${scenarios[0]!.backends!.join("/")} lock backend`);
  process.exit(2);
}
const say = (line: string) => {
  if (!values.json) console.log(line);
  else console.error(line);
};

say(`railfence drill ${name} - seed ${seed} (replay with --seed ${seed})`);
const results: DrillResult[] = [];
const reportDir = join(projectRoot(), "reports", "drills");
mkdirSync(reportDir, { recursive: true });
for (const lockBackend of backends) {
  for (const s of scenarios) {
    if (!runsOn(s, lockBackend)) {
      say(`\n== ${s.name} on ${lockBackend}: skipped (runs only on ${s.backends!.join("/")})`);
      continue;
    }
    say(`\n== ${s.name} on ${lockBackend}: ${s.summary}`);
    const logFile = join(reportDir, `${s.name}-${lockBackend}-${seed}.log`);
    const logStream = createWriteStream(logFile);
    const r = await runScenario(s, {
      lockBackend,
      seed,
      payouts,
      kills,
      log: (l) => {
        logStream.write(`${l}\n`);
        if (values.verbose) console.error(l);
      },
    }).catch(
      (err: unknown): DrillResult => ({
        scenario: s.name,
        lockBackend,
        seed,
        verdict: "FAIL",
        violations: [],
        counts: {},
        failures: [`drill crashed: ${err instanceof Error ? err.message : String(err)}`],
        notes: [],
        durationMs: 0,
      }),
    );
    await new Promise<void>((resolve) => logStream.end(resolve));
    results.push(r);
    say(`   log: ${logFile}`);
    for (const n of r.notes) say(`   ${n}`);
    for (const f of r.failures) say(`   FAILED EXPECTATION: ${f}`);
    for (const v of r.violations.slice(0, 10)) say(`   ${v.invariant}: ${v.detail}`);
    say(
      `   verdict: ${r.verdict}${r.verdict === "CORRUPTION_DETECTED" ? " (expected: a guard was removed on purpose, and the checker caught what it let through)" : ""}`,
    );
    writeFileSync(join(reportDir, `${s.name}-${lockBackend}-${seed}.md`), `${markdownReport(r)}\n`);
  }
}

const ok = (r: DrillResult) => {
  const s = scenarios.find((x) => x.name === r.scenario);
  return s?.expectsCorruption ? r.verdict === "CORRUPTION_DETECTED" : r.verdict === "PASS";
};
const table = combinedTable(results);
say(`\n${table}`);
writeFileSync(join(reportDir, `${name}-${seed}.md`), `# railfence drills: ${name} (seed ${seed})\n\n${table}\n`);
const written = recordResult(name === "soak" ? "soak" : "drills", resultLine(name, seed, results, ok));
if (written) say(`result recorded in ${written}`);
if (values.json) {
  const summary = results.length === 1 ? results[0]! : { scenario: name, seed, verdict: results.every(ok) ? "PASS" : "FAIL", results };
  console.log(JSON.stringify(summary));
}
process.exit(results.every(ok) ? 0 : 1);

/** One line for docs/results.md: per backend, what ran and whether each met its expectation. */
function resultLine(what: string, runSeed: number, rs: DrillResult[], met: (r: DrillResult) => boolean): string {
  const minutes = (ms: number) => `${(ms / 60_000).toFixed(1)} min`;
  const perBackend = (["pg", "etcd"] as const).flatMap((b) => {
    const mine = rs.filter((r) => r.lockBackend === b);
    if (mine.length === 0) return [];
    const missed = mine.filter((r) => !met(r)).map((r) => `${r.scenario} ${r.verdict}`);
    const caught = mine.filter((r) => r.verdict === "CORRUPTION_DETECTED" && met(r)).length;
    const time = minutes(mine.reduce((t, r) => t + r.durationMs, 0));
    if (what === "soak") {
      return mine.map((r) => {
        const resolved = (r.counts.resolvedPaid ?? 0) + (r.counts.resolvedNotPaid ?? 0);
        return `${b}: ${r.verdict}, ${r.violations.length} violations, ${(r.counts.payoutsPaid ?? 0).toLocaleString("en")} payouts paid, ${resolved} ambiguous resolved, ${time}`;
      });
    }
    return [
      `${b}: ${mine.length} scenarios, ${missed.length === 0 ? "all as expected" : `NOT as expected: ${missed.join(", ")}`} (${caught} negative controls caught), ${time}`,
    ];
  });
  const guard = what === "soak" && values["disable-guard"] ? ` (guard removed: ${values["disable-guard"]})` : "";
  return `${what}${guard}, seed ${runSeed}: ${perBackend.join("; ")}`;
}
