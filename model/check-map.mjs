#!/usr/bin/env node
/**
 * Keeps the model <-> code table in model/README.md honest.
 *
 * Each row of the table names a model step (an anchor `[M:name]` that must appear in
 * model/railfence.pml), the code it stands for (file and line range) and a fingerprint of
 * those lines (sha256 of the lines with surrounding whitespace trimmed, 12 hex digits). The
 * check fails when a model anchor disappears, a file disappears, or the mapped lines no longer
 * have the recorded fingerprint, and says exactly what happened:
 *   - the same text now sits at other lines: "moved to 61-75" (run with --repoint to move it);
 *   - the text changed: what the lines now say, and the fingerprint to record once someone has
 *     re-read the model step against the new code (run with --accept <id>).
 * Rows whose lines are `pending` stand for code that does not exist yet; they are listed, not
 * checked.
 *
 *   node model/check-map.mjs                 check (exit 1 on any mismatch)
 *   node model/check-map.mjs --repoint       move rows whose unchanged text moved
 *   node model/check-map.mjs --accept a,b    record the current fingerprint of rows a and b
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const readmePath = join(here, "README.md");
const modelPath = join(here, "railfence.pml");
const START = "<!-- model-map:start -->";
const END = "<!-- model-map:end -->";

export function fingerprint(lines) {
  return createHash("sha256").update(lines.map((l) => l.trim()).join("\n")).digest("hex").slice(0, 12);
}

/** Parses the table rows between the markers: | id | model | code | lines | fingerprint | stands for | */
export function parseRows(readme) {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`model/README.md has no ${START} ... ${END} table`);
  const rows = [];
  const body = readme.slice(start + START.length, end).split("\n");
  for (const [i, raw] of body.entries()) {
    const cells = raw.split("|").slice(1, -1).map((c) => c.trim());
    if (cells.length !== 6 || cells[0] === "id" || /^-+$/.test(cells[0])) continue;
    const [id, model, code, lines, fp, what] = cells;
    rows.push({ id, model, file: code.replace(/`/g, ""), lines, fp: fp.replace(/`/g, ""), what, index: i, raw });
  }
  return rows;
}

function anchorsOf(modelCell) {
  return [...modelCell.matchAll(/\[M:[a-z0-9-]+\]/g)].map((m) => m[0]);
}

/** Finds where a window with this fingerprint and length now sits in the file, if anywhere. */
function findMoved(fileLines, length, fp) {
  const found = [];
  for (let s = 0; s + length <= fileLines.length; s++) {
    if (fingerprint(fileLines.slice(s, s + length)) === fp) found.push(`${s + 1}-${s + length}`);
  }
  return found;
}

/** Checks the table; `dirs` lets a test point it at a copy of the tree. */
export function check({ repoint = false, accept = [], dirs = { root, readmePath, modelPath } } = {}) {
  const readme = readFileSync(dirs.readmePath, "utf8");
  const model = readFileSync(dirs.modelPath, "utf8");
  const rows = parseRows(readme);
  const problems = [];
  const pending = [];
  const updates = new Map();
  for (const row of rows) {
    for (const anchor of anchorsOf(row.model)) {
      if (!model.includes(anchor)) problems.push(`${row.id}: model step ${anchor} is no longer in model/railfence.pml`);
    }
    if (anchorsOf(row.model).length === 0) problems.push(`${row.id}: names no model step ([M:...])`);
    if (row.lines === "pending") {
      pending.push(`${row.id}: ${row.what}`);
      continue;
    }
    const m = /^(\d+)-(\d+)$/.exec(row.lines);
    if (!m) {
      problems.push(`${row.id}: lines must be "start-end" or "pending", not "${row.lines}"`);
      continue;
    }
    const path = join(dirs.root, row.file);
    if (!existsSync(path)) {
      problems.push(`${row.id}: ${row.file} no longer exists`);
      continue;
    }
    const fileLines = readFileSync(path, "utf8").split("\n");
    const [from, to] = [Number(m[1]), Number(m[2])];
    const current = fingerprint(fileLines.slice(from - 1, to));
    if (current === row.fp) continue;
    if (accept.includes(row.id)) {
      updates.set(row, { lines: row.lines, fp: current });
      continue;
    }
    const moved = row.fp ? findMoved(fileLines, to - from + 1, row.fp) : [];
    if (moved.length === 1) {
      if (repoint) updates.set(row, { lines: moved[0], fp: row.fp });
      else problems.push(`${row.id}: ${row.file}:${row.lines} moved to ${row.file}:${moved[0]} (same text). Run: node model/check-map.mjs --repoint`);
      continue;
    }
    const now = fileLines.slice(from - 1, to).map((l) => `      | ${l}`).join("\n");
    problems.push(
      `${row.id}: ${row.file}:${row.lines} changed (fingerprint ${row.fp || "none"} -> ${current}). ` +
        `Re-read model step ${anchorsOf(row.model).join(" ")} against the new code; if the model still says what the code does, ` +
        `run: node model/check-map.mjs --accept ${row.id}   (or fix the row's lines). The lines now read:\n${now}`,
    );
  }
  if (updates.size > 0) {
    const lines = readme.split("\n");
    const offset = readme.slice(0, readme.indexOf(START) + START.length).split("\n").length - 1;
    for (const [row, u] of updates) {
      const cells = row.raw.split("|");
      cells[4] = ` ${u.lines} `;
      cells[5] = ` \`${u.fp}\` `;
      lines[offset + row.index] = cells.join("|");
    }
    writeFileSync(dirs.readmePath, lines.join("\n"));
  }
  return { rows, problems, pending, updated: [...updates.keys()].map((r) => r.id) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const acceptAt = args.indexOf("--accept");
  const accept = acceptAt >= 0 ? (args[acceptAt + 1] ?? "").split(",").filter(Boolean) : [];
  const { rows, problems, pending, updated } = check({ repoint: args.includes("--repoint"), accept });
  for (const id of updated) console.log(`updated ${id}`);
  console.log(`model <-> code map: ${rows.length} rows, ${rows.length - pending.length} checked, ${pending.length} pending (code not written yet)`);
  for (const p of pending) console.log(`  pending ${p}`);
  if (problems.length > 0) {
    console.error(`\n${problems.length} mapped statement(s) changed without the table:`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
}
