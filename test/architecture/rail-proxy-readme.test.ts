/**
 * services/rail-proxy/README.md points at the line that is each ADR-007 rule and quotes it. This
 * keeps the table true: every quoted row must find its quote on exactly the line it names.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/project-root.js";

const readmePath = join(projectRoot(), "services", "rail-proxy", "README.md");

interface Row {
  rule: string;
  file: string;
  line: number | undefined;
  quote: string | undefined;
}

/** The rows of the "Where each rule lives" table. */
export function ruleRows(markdown: string, base: string): Row[] {
  const section = markdown.split("## Where each rule lives")[1]?.split("\n## ")[0] ?? "";
  const rows: Row[] = [];
  for (const line of section.split("\n")) {
    const m = line.match(/^\| (.+?) \| \[[^\]]+\]\(([^)#]+)(?:#L(\d+))?\) \| (.+) \|$/);
    if (!m) continue;
    const quoted = m[4]!.match(/^(`+) ?(.*?) ?\1$/);
    rows.push({ rule: m[1]!, file: resolve(base, m[2]!), line: m[3] ? Number(m[3]) : undefined, quote: quoted ? quoted[2] : undefined });
  }
  return rows;
}

/** What is wrong with a row, or undefined. */
export function rowProblem(row: Row, read: (file: string) => string | undefined): string | undefined {
  const text = read(row.file);
  if (text === undefined) return `${row.rule}: ${row.file} does not exist`;
  if (row.line === undefined || row.quote === undefined) return undefined;
  const actual = text.split("\n")[row.line - 1] ?? "";
  if (!actual.includes(row.quote)) {
    const now = text.split("\n").flatMap((l, i) => (l.includes(row.quote!) ? [i + 1] : []));
    const where = now.length === 1 ? `; the quote is now at line ${now[0]}: move the row there` : now.length === 0 ? "; the quote is nowhere in the file" : "";
    return `${row.rule}: line ${row.line} of ${row.file} no longer says \`${row.quote}\` (it says \`${actual.trim()}\`)${where}`;
  }
  return undefined;
}

const read = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : undefined);

describe("services/rail-proxy/README.md: each ADR-007 rule at the line it names", () => {
  const rows = ruleRows(readFileSync(readmePath, "utf8"), dirname(readmePath));

  it("has a row for each rule D1-D7 that the proxy enforces, and most rows quote a line", () => {
    for (const d of ["D1", "D2", "D3", "D4", "D6", "D7"])
      expect(
        rows.some((r) => r.rule.includes(d)),
        d,
      ).toBe(true);
    expect(rows.filter((r) => r.quote !== undefined).length).toBeGreaterThanOrEqual(18);
  });

  it("every quoted line still says what the table quotes", () => {
    expect(rows.map((r) => rowProblem(r, read)).filter(Boolean)).toEqual([]);
  });

  it("a moved rule is caught (negative control: the same check against a shifted line)", () => {
    const quoted = rows.filter((r) => r.quote !== undefined);
    expect(quoted.length).toBeGreaterThan(0);
    for (const r of quoted) expect(rowProblem({ ...r, line: r.line! + 1 }, read), r.rule).toMatch(/no longer says/);
    expect(rowProblem({ ...quoted[0]!, file: `${quoted[0]!.file}.gone` }, read)).toMatch(/does not exist/);
  });
});
