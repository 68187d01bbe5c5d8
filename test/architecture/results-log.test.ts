/**
 * docs/results.md is written by the long runs (tools/harness/results-log.ts): a row lands under
 * its own heading, newest first, at most KEEP rows per heading, other headings untouched. The
 * committed file is in the shape the writer keeps.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { KEEP, RESULT_SECTIONS, withResult } from "../../tools/harness/results-log.js";

const row = (n: number, result = `run ${n}`) => ({ date: `2026-12-0${n % 9} 10:00`, commit: `c${n}`, result });

describe("docs/results.md", () => {
  it("a first run creates the file, its heading and its row", () => {
    const text = withResult("", "soak", row(1, "pg: PASS"));
    expect(text).toMatch(/^# Results\n/);
    expect(text).toContain(`## ${RESULT_SECTIONS.soak}\n\n| date (UTC) | commit | result |\n|---|---|---|\n| 2026-12-01 10:00 | c1 | pg: PASS |\n`);
  });

  it("rows go newest first under their own heading, and the other headings are left as they were", () => {
    let text = withResult("", "drills", row(1));
    text = withResult(text, "soak", row(2));
    text = withResult(text, "drills", row(3));
    const drills = text.split(`## ${RESULT_SECTIONS.drills}`)[1]!.split("## ")[0]!;
    expect(drills.indexOf("run 3")).toBeLessThan(drills.indexOf("run 1"));
    expect(drills).not.toContain("run 2");
    expect(text.split(`## ${RESULT_SECTIONS.soak}`)[1]).toContain("run 2");
  });

  it(`keeps the last ${KEEP} rows of a heading; a pipe in a result cannot break the table`, () => {
    let text = "";
    for (let n = 1; n <= KEEP + 3; n++) text = withResult(text, "bench", row(n));
    const rows = text.split("\n").filter((l) => /^\| 2026/.test(l));
    expect(rows).toHaveLength(KEEP);
    expect(rows[0]).toContain(`run ${KEEP + 3}`);
    expect(text).not.toContain("| run 1 |");
    expect(withResult("", "hostile", row(1, "a | b"))).toContain("| a \\| b |");
  });

  it("the committed file is in the writer's shape: writing a row again adds it first and drops only what is past KEEP", () => {
    const committed = readFileSync(join(projectRoot(), "docs", "results.md"), "utf8");
    const probe = "| 2026-12-01 10:00 | c1 | probe |";
    for (const section of Object.keys(RESULT_SECTIONS) as Array<keyof typeof RESULT_SECTIONS>) {
      const again = withResult(committed, section, row(1, "probe"));
      const before = rowsOf(committed, section);
      expect(before.length, section).toBeLessThanOrEqual(KEEP);
      if (before.length === 0) {
        // A heading the file does not have yet is appended, the rest untouched.
        expect(again.startsWith(committed.trimEnd()), section).toBe(true);
        expect(rowsOf(again, section), section).toEqual([probe]);
        continue;
      }
      expect(rowsOf(again, section), section).toEqual([probe, ...before].slice(0, KEEP));
      // Everything outside this heading's rows is byte for byte what was committed.
      expect(outsideRows(again, section), section).toBe(outsideRows(committed, section));
    }
  });
});

/** The data rows under a heading, in file order. */
function rowsOf(text: string, section: keyof typeof RESULT_SECTIONS): string[] {
  return sectionOf(text, section)
    .split("\n")
    .filter((l) => l.startsWith("| ") && !l.startsWith("| date (UTC)"));
}

function sectionOf(text: string, section: keyof typeof RESULT_SECTIONS): string {
  const heading = `## ${RESULT_SECTIONS[section]}\n`;
  const at = text.indexOf(heading);
  if (at < 0) return "";
  const next = text.indexOf("\n## ", at + heading.length);
  return text.slice(at, next < 0 ? undefined : next);
}

/** The file with this heading's data rows taken out. */
function outsideRows(text: string, section: keyof typeof RESULT_SECTIONS): string {
  const part = sectionOf(text, section);
  const rows = new Set(rowsOf(text, section));
  const stripped = part
    .split("\n")
    .filter((l) => !rows.has(l))
    .join("\n");
  return text.replace(part, stripped);
}
