/**
 * Anchors in the code instead of line numbers. A rule, or a model step's code, is tagged where it
 * lives by a comment holding `[rule:<id>]` on its own line; the tagged code starts on the next
 * line and ends before the comment holding `[/rule:<id>]`, or is that one next line when there is
 * no end tag. The tables that point at code (services/rail-proxy/README.md, model/README.md) name
 * tags, and `npm run generate` writes the file and line columns from them: editing above a rule no
 * longer moves a row by hand. Applied migrations never change (their checksum is recorded), so a
 * row may still name a migration's lines directly.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

export interface Tagged {
  id: string;
  /** Path from the project root, with forward slashes. */
  file: string;
  /** 1-based, inclusive, tag lines excluded. */
  start: number;
  end: number;
  /** The tagged lines, without any tag line inside them. */
  lines: string[];
}

const START = /\[rule:([a-z0-9][a-z0-9-]*)\]/;
const END = /\[\/rule:([a-z0-9][a-z0-9-]*)\]/;
const TAG_LINE = /\[\/?rule:[a-z0-9-]+\]/;
/** Where tags may live: the code and SQL the tables point at. */
export const TAGGED_TREES = ["services", "migrations", "tools/harness"];
const SOURCE = /\.(ts|mjs|sql)$/;

/** The tags of one file's text. Problems (an end without a start, a tag used twice) are returned, never thrown. */
export function tagsIn(file: string, text: string): { tags: Tagged[]; problems: string[] } {
  const lines = text.split("\n");
  const tags: Tagged[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [i, line] of lines.entries()) {
    const end = END.exec(line);
    if (end && !lines.slice(0, i).some((l) => l.includes(`[rule:${end[1]}]`)))
      problems.push(`${file}:${i + 1}: [/rule:${end[1]}] has no [rule:${end[1]}] above it`);
    const m = START.exec(line);
    if (!m) continue;
    const id = m[1]!;
    if (seen.has(id)) problems.push(`${file}:${i + 1}: [rule:${id}] is tagged twice in this file`);
    seen.add(id);
    const close = lines.findIndex((l, j) => j > i && l.includes(`[/rule:${id}]`));
    const body: Array<[number, string]> = [];
    if (close < 0) {
      const next = lines.findIndex((l, j) => j > i && !TAG_LINE.test(l));
      if (next < 0) {
        problems.push(`${file}:${i + 1}: [rule:${id}] tags nothing`);
        continue;
      }
      body.push([next, lines[next]!]);
    } else {
      for (let j = i + 1; j < close; j++) if (!TAG_LINE.test(lines[j]!)) body.push([j, lines[j]!]);
      if (body.length === 0) {
        problems.push(`${file}:${i + 1}: [rule:${id}] .. [/rule:${id}] holds no line`);
        continue;
      }
    }
    tags.push({ id, file, start: body[0]![0] + 1, end: body.at(-1)![0] + 1, lines: body.map(([, l]) => l) });
  }
  return { tags, problems };
}

function sourceFiles(root: string, dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(join(root, dir));
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const path = `${dir}/${name}`;
    if (statSync(join(root, path)).isDirectory()) return name === "node_modules" || name === "gen" ? [] : sourceFiles(root, path);
    return SOURCE.test(name) ? [path] : [];
  });
}

/** Every tag under the tagged trees of root; an id tagged in two places is a problem. */
export function collectTags(root: string, trees: readonly string[] = TAGGED_TREES): { tags: Map<string, Tagged>; problems: string[] } {
  const tags = new Map<string, Tagged>();
  const problems: string[] = [];
  for (const file of trees.flatMap((t) => sourceFiles(root, t))) {
    const found = tagsIn(relative(root, join(root, file)).split(sep).join("/"), readFileSync(join(root, file), "utf8"));
    problems.push(...found.problems);
    for (const t of found.tags) {
      const other = tags.get(t.id);
      if (other) problems.push(`[rule:${t.id}] is tagged in ${other.file}:${other.start} and ${t.file}:${t.start}`);
      else tags.set(t.id, t);
    }
  }
  return { tags, problems };
}
