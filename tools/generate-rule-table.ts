/**
 * Writes the "where" and "the line says" columns of services/rail-proxy/README.md's rule table
 * from the tags in the code (tools/rule-tags.ts): each row names its tag; the row then points at
 * the tagged line and quotes it. A row whose tag is "—" points at something that does not move (an
 * applied migration's line, a test) and is left as written. Run by `npm run generate`; CI fails
 * when the README differs from what this writes.
 *
 *   npx tsx tools/generate-rule-table.ts          rewrite the table
 *   npx tsx tools/generate-rule-table.ts --check  exit 1 when the table differs (nothing written)
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { collectTags, type Tagged } from "./rule-tags.js";

const root = join(import.meta.dirname, "..");
export const RULE_TABLE = "services/rail-proxy/README.md";
const ROW = /^\| (.+?) \| `([a-z0-9-]+)` \| (.+?) \| (.+) \|$/;

/** The README with every tagged row pointing at its tag; problems for a tag that does not exist. */
export function generateRuleTable(readme: string, tags: ReadonlyMap<string, Tagged>, readmeDir: string): { text: string; problems: string[]; used: string[] } {
  const problems: string[] = [];
  const used: string[] = [];
  const text = readme
    .split("\n")
    .map((line) => {
      const m = ROW.exec(line);
      if (!m) return line;
      const [, rule, id] = m;
      const tag = tags.get(id!);
      if (!tag) {
        problems.push(`${RULE_TABLE}: "${rule}" names [rule:${id}], which no code carries`);
        return line;
      }
      used.push(id!);
      const path = relative(readmeDir, join(root, tag.file)).split("\\").join("/");
      const name = tag.file.startsWith("migrations/") ? tag.file.split("/").pop() : path;
      const quote = tag.lines[0]!.trim();
      const ticks = quote.includes("`") ? "``" : "`";
      const pad = ticks.length > 1 ? " " : "";
      return `| ${rule} | \`${id}\` | [${name}:${tag.start}](${path}#L${tag.start}) | ${ticks}${pad}${quote}${pad}${ticks} |`;
    })
    .join("\n");
  return { text, problems, used };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = join(root, RULE_TABLE);
  const { tags, problems: tagProblems } = collectTags(root);
  const readme = readFileSync(path, "utf8");
  const { text, problems } = generateRuleTable(readme, tags, join(root, "services", "rail-proxy"));
  for (const p of [...tagProblems, ...problems]) console.error(p);
  if (tagProblems.length + problems.length > 0) process.exit(1);
  if (process.argv.includes("--check")) {
    if (text !== readme) {
      console.error(`${RULE_TABLE} differs from its tags: run npm run generate`);
      process.exit(1);
    }
  } else if (text !== readme) writeFileSync(path, text);
}
