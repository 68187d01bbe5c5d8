/**
 * Keeps the model <-> code table in model/README.md honest.
 *
 * Each row names a model step (an anchor `[M:name]` that must appear in model/railfence.pml), the
 * code it stands for and a fingerprint of that code (sha256 of its lines, surrounding whitespace
 * trimmed, 12 hex digits). The code is found by its tag, `[rule:<row id>]` in a comment where it
 * lives (tools/rule-tags.ts): the code and lines columns are written from the tag (`--write`, run
 * by `npm run generate`), so an edit above a step never moves a row by hand. A row with no tag
 * names an applied migration's lines, which never change (the migration's checksum is recorded).
 * The check fails when a model anchor disappears, a tag or file disappears, the columns differ
 * from the tag, or the code no longer has the recorded fingerprint: then re-read the model step
 * against the new code, and record the new fingerprint with `--accept <id>`.
 *
 *   npx tsx model/check-map.ts                 check (exit 1 on any problem)
 *   npx tsx model/check-map.ts --write         write the code and lines columns from the tags
 *   npx tsx model/check-map.ts --accept a,b    record the current fingerprint of rows a and b
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { collectTags, type Tagged } from "../tools/rule-tags.js";

const here = dirname(fileURLToPath(import.meta.url));
const START = "<!-- model-map:start -->";
const END = "<!-- model-map:end -->";

export interface Row {
  id: string;
  model: string;
  file: string;
  lines: string;
  fp: string;
  what: string;
  index: number;
  raw: string;
}

export interface Dirs {
  root: string;
  readmePath: string;
  modelPath: string;
}

export const DEFAULT_DIRS: Dirs = { root: join(here, ".."), readmePath: join(here, "README.md"), modelPath: join(here, "railfence.pml") };

export function fingerprint(lines: string[]): string {
  return createHash("sha256")
    .update(lines.map((l) => l.trim()).join("\n"))
    .digest("hex")
    .slice(0, 12);
}

/** Parses the table rows between the markers: | id | model | code | lines | fingerprint | stands for | */
export function parseRows(readme: string): Row[] {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`model/README.md has no ${START} ... ${END} table`);
  const rows: Row[] = [];
  for (const [i, raw] of readme
    .slice(start + START.length, end)
    .split("\n")
    .entries()) {
    const cells = raw
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells.length !== 6 || cells[0] === "id" || /^-+$/.test(cells[0]!)) continue;
    const [id, model, code, lines, fp, what] = cells as [string, string, string, string, string, string];
    rows.push({ id, model, file: code.replace(/`/g, ""), lines, fp: fp.replace(/`/g, ""), what, index: i, raw });
  }
  return rows;
}

const anchorsOf = (modelCell: string) => [...modelCell.matchAll(/\[M:[a-z0-9-]+\]/g)].map((m) => m[0]);

/** The code a row stands for: its tag's, or (no tag) the named lines of an applied migration. */
function codeOf(row: Row, tag: Tagged | undefined, root: string): { file: string; lines: string; text: string[] } | string {
  if (tag) return { file: tag.file, lines: `${tag.start}-${tag.end}`, text: tag.lines };
  if (!row.file.startsWith("migrations/")) return `${row.id}: no [rule:${row.id}] tag in the code (only an applied migration may be named by its lines)`;
  const m = /^(\d+)-(\d+)$/.exec(row.lines);
  if (!m) return `${row.id}: lines must be "start-end", not "${row.lines}"`;
  const path = join(root, row.file);
  if (!existsSync(path)) return `${row.id}: ${row.file} no longer exists`;
  return {
    file: row.file,
    lines: row.lines,
    text: readFileSync(path, "utf8")
      .split("\n")
      .slice(Number(m[1]) - 1, Number(m[2])),
  };
}

/** Checks the table (and with write/accept, updates it); `dirs` lets a test point it at a copy of the tree. */
export function check({ write = false, accept = [] as string[], dirs = DEFAULT_DIRS } = {}): {
  rows: Row[];
  problems: string[];
  updated: string[];
  used: string[];
} {
  const readme = readFileSync(dirs.readmePath, "utf8");
  const model = readFileSync(dirs.modelPath, "utf8");
  const rows = parseRows(readme);
  const { tags, problems } = collectTags(dirs.root);
  const updates = new Map<Row, { file: string; lines: string; fp: string }>();
  for (const row of rows) {
    for (const anchor of anchorsOf(row.model))
      if (!model.includes(anchor)) problems.push(`${row.id}: model step ${anchor} is no longer in model/railfence.pml`);
    if (anchorsOf(row.model).length === 0) problems.push(`${row.id}: names no model step ([M:...])`);
    const code = codeOf(row, tags.get(row.id), dirs.root);
    if (typeof code === "string") {
      problems.push(code);
      continue;
    }
    const current = fingerprint(code.text);
    const fp = accept.includes(row.id) ? current : row.fp;
    const moved = code.file !== row.file || code.lines !== row.lines;
    if (moved || fp !== row.fp) {
      if (write || accept.includes(row.id)) updates.set(row, { file: code.file, lines: code.lines, fp });
      else problems.push(`${row.id}: the table says ${row.file}:${row.lines}, its tag is at ${code.file}:${code.lines}: run npm run generate`);
    }
    if (current !== fp) {
      const now = code.text.map((l) => `      | ${l}`).join("\n");
      problems.push(
        `${row.id}: ${code.file}:${code.lines} changed (fingerprint ${row.fp || "none"} -> ${current}). ` +
          `Re-read model step ${anchorsOf(row.model).join(" ")} against the new code; if the model still says what the code does, ` +
          `run: npx tsx model/check-map.ts --accept ${row.id}. The lines now read:\n${now}`,
      );
    }
  }
  if (updates.size > 0) {
    const lines = readme.split("\n");
    const offset = readme.slice(0, readme.indexOf(START) + START.length).split("\n").length - 1;
    for (const [row, u] of updates) {
      const cells = row.raw.split("|");
      cells[3] = ` \`${u.file}\` `;
      cells[4] = ` ${u.lines} `;
      cells[5] = ` \`${u.fp}\` `;
      lines[offset + row.index] = cells.join("|");
    }
    writeFileSync(dirs.readmePath, lines.join("\n"));
  }
  return { rows, problems, updated: [...updates.keys()].map((r) => r.id), used: rows.map((r) => r.id).filter((id) => tags.has(id)) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const acceptAt = args.indexOf("--accept");
  const accept = acceptAt >= 0 ? (args[acceptAt + 1] ?? "").split(",").filter(Boolean) : [];
  const { rows, problems, updated } = check({ write: args.includes("--write"), accept });
  for (const id of updated) console.log(`updated ${id}`);
  console.log(`model <-> code map: ${rows.length} rows checked`);
  if (problems.length > 0) {
    console.error(`\n${problems.length} problem(s):`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
}
