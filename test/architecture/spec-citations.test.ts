/**
 * Every spec id the repository cites resolves inside it: the requirement ids (UC-, INV-, FR-),
 * the contract sections (C1..C5 §n.m, 00/02 §n.m) and ADR-007's decisions (D1..D7) are defined
 * in docs/spec/. And every decision record carries its status and date and is in the index.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const SPEC_DIR = join(ROOT, "docs/spec");
const DECISIONS = join(ROOT, "docs/decisions");
const SCANNED = ["services", "tools", "test", "model", "migrations", "clients", "deploy", "docs", "README.md"];
const SKIPPED = new Set(["node_modules", "dist", "gen", ".git", ".cluster", ".tools", "spec"]);
const TEXT = /\.(ts|mjs|js|go|sql|pml|md|yaml|yml|tpl|txt|sh|json)$/;

const CITATION = /\b(?:(?:UC|INV|FR)-\d{2}\b|(?:C[1-5]|0[02]) ?§ ?\d+\.\d+|ADR-007 D\d\b)/g;

function files(path: string): string[] {
  const full = join(ROOT, path);
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full).flatMap((name) => (SKIPPED.has(name) ? [] : files(join(path, name))));
}

/** The key a citation must find in the spec: the id itself, a section number, or a D-number. */
export function citationKey(citation: string): string {
  const section = /§ ?(\d+\.\d+)/.exec(citation);
  if (section) return `§${section[1]}`;
  const decision = /ADR-007 (D\d)/.exec(citation);
  if (decision) return decision[1]!;
  return citation;
}

/** The citations in `text` whose key the spec does not define. */
export function unresolved(text: string, spec: string): string[] {
  const defined = spec.replace(/§ (\d)/g, "§$1");
  return [...text.matchAll(CITATION)].map((m) => m[0]).filter((c) => !defined.includes(citationKey(c)));
}

/** What a decision record lacks: its status line with a date. */
export function decisionProblems(text: string): string[] {
  return /^Status: (accepted|superseded|proposed)\b[^\n]*Date: \d{4}-\d{2}-\d{2}/m.test(text) ? [] : ["no 'Status: ... · Date: YYYY-MM-DD' line"];
}

const spec = readdirSync(SPEC_DIR)
  .map((f) => readFileSync(join(SPEC_DIR, f), "utf8"))
  .join("\n");

describe("spec citations", () => {
  it("every UC/INV/FR id, contract section and ADR-007 decision cited in the repository is defined in docs/spec", () => {
    const scanned = SCANNED.flatMap(files).filter((f) => TEXT.test(f));
    expect(scanned.length).toBeGreaterThan(200);
    const cited = scanned.flatMap((f) => [...readFileSync(join(ROOT, f), "utf8").matchAll(CITATION)].map((m) => m[0]));
    expect(cited.length).toBeGreaterThan(50);
    const missing = scanned.flatMap((f) =>
      unresolved(readFileSync(join(ROOT, f), "utf8"), spec).map((c) => `${relative(ROOT, join(ROOT, f)).split(sep).join("/")}: ${c}`),
    );
    expect(missing).toEqual([]);
  });

  it("catches a citation the spec does not define (negative control)", () => {
    expect(unresolved("see INV-02 and C3 §3.9", spec)).toEqual([]);
    // Joined at run time so that this file cites nothing undefined itself.
    const [inv, section, decision] = [["INV", "09"].join("-"), ["C3 §3", "42"].join("."), ["ADR-007", "D9"].join(" ")];
    expect(unresolved(`see ${inv}, ${section} and ${decision}`, spec)).toEqual([inv, section, decision]);
  });
});

describe("decision records", () => {
  const records = readdirSync(DECISIONS).filter((f) => /^\d{3}-.*\.md$/.test(f));
  const index = readFileSync(join(DECISIONS, "README.md"), "utf8");

  it("each has a status and a date, and the index links it", () => {
    expect(records.length).toBeGreaterThan(40);
    const problems = records.flatMap((f) => [
      ...decisionProblems(readFileSync(join(DECISIONS, f), "utf8")).map((p) => `${f}: ${p}`),
      ...(index.includes(`](${f})`) ? [] : [`${f}: not in docs/decisions/README.md`]),
    ]);
    expect(problems).toEqual([]);
  });

  it("catches a record without a status line (negative control)", () => {
    expect(decisionProblems("# 099 — something\n\n**Decision.** x")).toHaveLength(1);
    expect(decisionProblems("# 099 — something\n\nStatus: accepted · Date: 2026-12-05\n")).toEqual([]);
  });
});
