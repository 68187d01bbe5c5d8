/**
 * Anchors, not line numbers (tools/rule-tags.ts): the rail-proxy rule table and the model map
 * point at code through `[rule:<id>]` tags, and `npm run generate` writes their locations. Here:
 * the tags parse without problems, every tag is used by a table (no orphan), the rule table is
 * exactly what the generator writes from today's tags, and the parser and generator catch what
 * they must (negative controls).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { check } from "../../model/check-map.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { generateRuleTable, RULE_TABLE } from "../../tools/generate-rule-table.js";
import { collectTags, tagsIn } from "../../tools/rule-tags.js";

const root = projectRoot();
const readme = readFileSync(join(root, RULE_TABLE), "utf8");
const { tags, problems } = collectTags(root);
const table = () => generateRuleTable(readme, tags, join(root, "services", "rail-proxy"));

describe("rule tags", () => {
  it("parse without problems, and each is used by the rule table or the model map", () => {
    expect(problems).toEqual([]);
    const used = new Set([...table().used, ...check().used]);
    expect([...tags.keys()].filter((id) => !used.has(id))).toEqual([]);
  });

  it("services/rail-proxy/README.md is what npm run generate writes from the tags", () => {
    const { text, problems: tableProblems } = table();
    expect(tableProblems).toEqual([]);
    expect(text).toBe(readme);
  });

  it("the rule table covers D1-D7, most rows by tag", () => {
    for (const d of ["D1", "D2", "D3", "D4", "D6", "D7"]) expect(readme.includes(`| ${d}`) || readme.includes(`/${d}`), d).toBe(true);
    expect(table().used.length).toBeGreaterThanOrEqual(20);
  });

  it("negative controls: the parser names an orphan end, a tag used twice, a tag holding nothing", () => {
    const ok = tagsIn("a.ts", "// [rule:x]\nconst a = 1;\n// [rule:y]\nfoo();\nbar();\n// [/rule:y]\n");
    expect(ok.problems).toEqual([]);
    expect(ok.tags.map((t) => [t.id, t.start, t.end])).toEqual([
      ["x", 2, 2],
      ["y", 4, 5],
    ]);
    expect(tagsIn("a.ts", "foo();\n// [/rule:z]\n").problems).toEqual(["a.ts:2: [/rule:z] has no [rule:z] above it"]);
    expect(tagsIn("a.ts", "// [rule:x]\na();\n// [rule:x]\nb();\n").problems).toEqual(["a.ts:3: [rule:x] is tagged twice in this file"]);
    expect(tagsIn("a.ts", "// [rule:x]\n// [/rule:x]\n").problems).toEqual(["a.ts:1: [rule:x] .. [/rule:x] holds no line"]);
  });

  it("negative controls: code moved under a tag changes the generated table; a row naming no tag is named", () => {
    const id = table().used.find((i) => tags.get(i)!.file === "services/rail-proxy/admission.ts")!;
    const tag = tags.get(id)!;
    const shifted = new Map(tags);
    shifted.set(id, { ...tag, start: tag.start + 3, end: tag.end + 3 });
    expect(generateRuleTable(readme, shifted, join(root, "services", "rail-proxy")).text).not.toBe(readme);
    const unknown = readme.replace(`\`${id}\``, "`no-such-rule`");
    expect(generateRuleTable(unknown, tags, join(root, "services", "rail-proxy")).problems.some((p) => p.includes("[rule:no-such-rule]"))).toBe(true);
  });
});
