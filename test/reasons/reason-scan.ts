/**
 * Finds, in product source, every place that could put a reason on the wire or compare an
 * answer's reason with a word, so that a test can hold each of them to the catalogue
 * (services/shared/domain/reasons.ts). What the types cannot see is what this looks for:
 *
 * - `google.rpc.ErrorInfo` built anywhere but services/shared/domain/errors.ts (which builds it from
 *   catalogue entries only);
 * - a cast to a catalogue type (`as ReasonEntry`), the one way around those types;
 * - a reason compared with a string literal (`reason === "FENCED_OUT"`,
 *   `errorReason(err) === "NOT_AMBIGUOUS"`, `case "X":` in a `switch (reason)`, a literal set
 *   or array asked `.has(reason)` / `.includes(reason)`): every such word must be a catalogued
 *   reason, or the comparison can never be true (a typo, or a reason no server sends).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

export interface Finding {
  file: string;
  line: number;
  rule: "error-info-outside-errors-ts" | "cast-to-catalogue-type" | "reason-literal";
  text: string;
}

const REASON_WORD = `"([A-Z][A-Z0-9_]*)"`;
const CMP = "(?:===|!==|==|!=)";
/** An expression that is an ErrorInfo reason: `reason`, `x.reason`, `errorReason(...)`, `reasonOf(...)`. */
const REASON_EXPR = String.raw`(?:(?:\w+\.)*reason\b|errorReason\([^()]*\)|reasonOf\([^()]*\))`;

/** The product's TypeScript: services and the client library, without generated code and tests. */
export function productFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const d of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${d.name}`;
      if (d.isDirectory()) {
        if (!["gen", "node_modules", "dist"].includes(d.name)) walk(path);
      } else if (d.name.endsWith(".ts") && !d.name.endsWith(".test.ts") && !d.name.endsWith(".d.ts")) out.push(path);
    }
  };
  walk("services");
  walk("clients/typescript/src");
  return out;
}

const lineOf = (text: string, index: number) => text.slice(0, index).split("\n").length;

/** Every finding in one file's text; `reasons` are the wire reasons of the catalogue. */
export function scanSource(file: string, text: string, reasons: ReadonlySet<string>): Finding[] {
  const findings: Finding[] = [];
  const add = (rule: Finding["rule"], index: number, what: string) => findings.push({ file, line: lineOf(text, index), rule, text: what });
  const word = (w: string, index: number) => {
    if (!reasons.has(w)) add("reason-literal", index, w);
  };

  const isErrorsTs = file === "services/shared/domain/errors.ts";
  const isCatalogue = file.endsWith("/reasons.ts");
  if (!isErrorsTs) {
    for (const m of text.matchAll(/desc:\s*ErrorInfoSchema|create\(\s*ErrorInfoSchema/g)) add("error-info-outside-errors-ts", m.index, m[0]);
  }
  if (!isCatalogue && !isErrorsTs) {
    for (const m of text.matchAll(/\bas\s+(?:ReasonEntry|ReasonId|Reason|ReasonWithCode)\b/g)) add("cast-to-catalogue-type", m.index, m[0]);
  }

  for (const re of [new RegExp(`${REASON_EXPR}\\s*${CMP}\\s*${REASON_WORD}`, "g"), new RegExp(`${REASON_WORD}\\s*${CMP}\\s*${REASON_EXPR}`, "g")]) {
    for (const m of text.matchAll(re)) word(m[1]!, m.index);
  }
  // case labels of a switch on a reason, up to the switch's closing brace
  for (const m of text.matchAll(new RegExp(`switch\\s*\\(\\s*${REASON_EXPR}\\s*\\)\\s*\\{`, "g"))) {
    let depth = 1;
    let i = m.index + m[0].length;
    for (; i < text.length && depth > 0; i++) {
      if (text[i] === "{") depth++;
      else if (text[i] === "}") depth--;
    }
    const body = text.slice(m.index, i);
    for (const c of body.matchAll(new RegExp(`case\\s+${REASON_WORD}\\s*:`, "g"))) word(c[1]!, m.index + c.index);
  }
  // literal sets asked about a reason: NAME.has(reason) with NAME = new Set(["A", "B"])
  for (const m of text.matchAll(new RegExp(`(\\w+)\\.has\\(\\s*${REASON_EXPR}\\s*\\)`, "g"))) {
    const def = new RegExp(`\\b${m[1]}\\b[^=;]*=\\s*new Set(?:<[^>]*>)?\\(\\s*\\[([^\\]]*)\\]`).exec(text);
    if (def) for (const w of def[1]!.matchAll(new RegExp(REASON_WORD, "g"))) word(w[1]!, def.index);
  }
  // literal arrays: ["A", "B"].includes(reason)
  for (const m of text.matchAll(new RegExp(`\\[([^\\]]*)\\]\\.includes\\(\\s*${REASON_EXPR}\\s*\\)`, "g"))) {
    for (const w of m[1]!.matchAll(new RegExp(REASON_WORD, "g"))) word(w[1]!, m.index);
  }
  return findings;
}

/** Scans every product file under root. */
export function scanProduct(root: string, reasons: ReadonlySet<string>): Finding[] {
  return productFiles(root).flatMap((f) => scanSource(relative(root, join(root, f)), readFileSync(join(root, f), "utf8"), reasons));
}
