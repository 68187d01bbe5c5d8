/** Runs scenarios and turns their results into the drill report (table, markdown, JSON). */
import { formatTable } from "../invariants.js";
import { INVARIANTS } from "../../../services/cli/audit/invariants.js";
import { seededRng } from "./rng.js";
import type { DrillParams, DrillResult, Scenario } from "./scenario.js";

export async function runScenario(s: Scenario, params: Omit<DrillParams, "rng">): Promise<DrillResult> {
  const started = Date.now();
  const partial = await s.run({ ...params, rng: seededRng(params.seed) });
  return { scenario: s.name, lockBackend: params.lockBackend, seed: params.seed, durationMs: Date.now() - started, ...partial };
}

/** One line per result: scenario x backend -> verdict and the counts that matter. */
export function combinedTable(results: DrillResult[]): string {
  const lines = [
    "| scenario | lock backend | verdict | payouts paid | fenced-out attempts | ambiguous / resolved | violations | duration |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const r of results) {
    const c = r.counts;
    const ambiguous = c.ambiguousBeforeReconcile ?? c.ambiguousUnresolved ?? 0;
    const resolved = (c.resolvedPaid ?? 0) + (c.resolvedNotPaid ?? 0);
    lines.push(
      `| ${r.scenario} | ${r.lockBackend} | ${r.verdict} | ${c.payoutsPaid ?? 0} | ${c.fencedOut ?? 0} | ${ambiguous} / ${resolved} | ${r.violations.length} | ${(r.durationMs / 1000).toFixed(1)} s |`,
    );
  }
  return lines.join("\n");
}

export function markdownReport(r: DrillResult): string {
  const names = [...new Set([...INVARIANTS, ...r.violations.map((v) => v.invariant)])];
  const table = formatTable({ table: names.map((invariant) => ({ invariant, violations: r.violations.filter((v) => v.invariant === invariant).length })) });
  return [
    `# drill ${r.scenario} (${r.lockBackend}, seed ${r.seed}): ${r.verdict}`,
    "",
    ...r.notes.map((n) => `- ${n}`),
    ...r.failures.map((f) => `- FAILED EXPECTATION: ${f}`),
    "",
    table,
    "",
    ...r.violations.slice(0, 100).map((v) => `- ${v.invariant}: ${v.detail}`),
    "",
    "```json",
    JSON.stringify(r.counts, null, 2),
    "```",
  ].join("\n");
}
