/**
 * The hand-written docs name reasons with their codes in a few fixed shapes:
 * "`aborted`, reason `FENCED_OUT`", "`unavailable` `LIMITS_UNAVAILABLE`", "`not_found` / 404,
 * reason ...", "`ABORTED RAIL_AMBIGUOUS`", and tables with a code column and a reason column.
 * This reads those pairs so that a test can hold them to the catalogue: a doc that says a
 * reason comes with another code, or names a reason no server sends, is wrong.
 */
import { Code } from "@connectrpc/connect";

export interface DocPair {
  line: number;
  code: Code;
  reason: string;
}

const CODE_BY_NAME = new Map<string, Code>();
for (const v of Object.values(Code)) {
  if (typeof v !== "number") continue;
  const upper = Code[v].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  CODE_BY_NAME.set(upper, v);
  CODE_BY_NAME.set(upper.toLowerCase(), v);
}
const LOWER = [...CODE_BY_NAME.keys()].filter((k) => k === k.toLowerCase()).join("|");
const UPPER = [...CODE_BY_NAME.keys()].filter((k) => k === k.toUpperCase()).join("|");
const REASON = "[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*";

const SHAPES = [
  // `aborted`, reason `FENCED_OUT` · `invalid_argument` (400) with reason `X` · `not_found` `X` · `failed_precondition`: `X`
  new RegExp(`\`(${LOWER})\`(?: \\/ \\d{3})?(?: \\(\\d{3}\\))?(?:,? (?:with )?reason |: | )\`(${REASON})\``, "g"),
  // `ABORTED RAIL_AMBIGUOUS` · `INVALID_ARGUMENT` `MALFORMED_REQUEST`
  new RegExp(`\`(${UPPER})(?: |\` \`)(${REASON})\``, "g"),
];

/** Every (code, reason) pair a markdown text states. */
export function docPairs(markdown: string): DocPair[] {
  const pairs: DocPair[] = [];
  const lines = markdown.split("\n");
  let table: { code: number; reason: number } | undefined;
  lines.forEach((text, i) => {
    for (const re of SHAPES) for (const m of text.matchAll(re)) pairs.push({ line: i + 1, code: CODE_BY_NAME.get(m[1]!)!, reason: m[2]! });
    // | code | reason | ... tables: every reason in the reason cell goes with the code cell
    const cells = text.trim().startsWith("|") ? text.trim().slice(1, -1).split("|").map((c) => c.trim()) : undefined;
    if (!cells) return void (table = undefined);
    if (cells.includes("code") && cells.includes("reason")) return void (table = { code: cells.indexOf("code"), reason: cells.indexOf("reason") });
    if (!table || /^-+$/.test(cells[0] ?? "")) return;
    const code = CODE_BY_NAME.get((cells[table.code] ?? "").replaceAll("`", ""));
    if (code === undefined) return;
    for (const m of (cells[table.reason] ?? "").matchAll(new RegExp(`\`(${REASON})\``, "g"))) pairs.push({ line: i + 1, code, reason: m[1]! });
  });
  return pairs;
}
