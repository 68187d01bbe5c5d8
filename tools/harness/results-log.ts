/**
 * docs/results.md: what the long runs measured, written by the runs themselves. `npm run drill`
 * (the scenarios, and the soak), `npm run hostile` and `npm run bench` each add one dated row,
 * newest first, under their own heading, with the commit they ran; the last KEEP rows per heading
 * stay. Results no longer live in the README or in hand-kept tables that go stale. Set
 * RAILFENCE_RESULTS=off to run without writing (a scratch run), or RAILFENCE_RESULTS_FILE to
 * write elsewhere.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../services/shared/process/project-root.js";

export const RESULT_SECTIONS = {
  drills: "Drills (`npm run drill -- all`)",
  soak: "Soak (`npm run drill -- soak`)",
  hostile: "Hostile input (`npm run hostile`)",
  bench: "Benchmarks (`npm run bench`)",
} as const;
export type ResultSection = keyof typeof RESULT_SECTIONS;
export const KEEP = 12;

const HEADER = "| date (UTC) | commit | result |\n|---|---|---|";
const INTRO = `# Results

Written by the runs themselves (tools/harness/results-log.ts): each long command adds a dated row
under its heading, newest first, with the commit it ran; the last ${KEEP} rows per heading stay.
How to run each, and what it checks: [drills](drills.md), [testing](testing.md),
[benchmarks](benchmarks.md). The full reports of a run stay under \`reports/\` (not committed).
`;

/** The results file with one row added under section: pure, for the test. */
export function withResult(text: string, section: ResultSection, row: { date: string; commit: string; result: string }): string {
  const base = text.trim() === "" ? INTRO : text;
  const heading = `## ${RESULT_SECTIONS[section]}`;
  const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\s*\n\s*/g, " ");
  const line = `| ${cell(row.date)} | ${cell(row.commit)} | ${cell(row.result)} |`;
  const parts = base.split(/(?=^## )/m);
  const at = parts.findIndex((p) => p.startsWith(`${heading}\n`));
  if (at < 0) return `${base.trimEnd()}\n\n${heading}\n\n${HEADER}\n${line}\n`;
  const body = parts[at]!;
  const rows = body.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| date (UTC)"));
  const kept = [line, ...rows].slice(0, KEEP);
  parts[at] = `${heading}\n\n${HEADER}\n${kept.join("\n")}\n${at < parts.length - 1 ? "\n" : ""}`;
  return parts.join("");
}

function commit(): string {
  try {
    const sha = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: projectRoot(), encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: projectRoot(), encoding: "utf8" }).trim() !== "";
    return dirty ? `${sha}+changes` : sha;
  } catch {
    return "unknown";
  }
}

/** Adds this run's row to docs/results.md (unless RAILFENCE_RESULTS=off). Returns the file written, if any. */
export function recordResult(section: ResultSection, result: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.RAILFENCE_RESULTS === "off") return undefined;
  const file = env.RAILFENCE_RESULTS_FILE ?? join(projectRoot(), "docs", "results.md");
  const text = existsSync(file) ? readFileSync(file, "utf8") : "";
  const date = new Date().toISOString().slice(0, 16).replace("T", " ");
  writeFileSync(file, withResult(text, section, { date, commit: commit(), result }));
  return file;
}
