/**
 * The `npm run generate` step for docs/metrics.md: every Prometheus metric the services define,
 * with its type, labels, owner and help text, read from the source (every
 * `new Counter|Gauge|Histogram({ name, help, labelNames })` under services/), so the
 * list cannot forget a metric or keep a removed one. A name or help given as a `const` of the
 * same file is resolved; anything else the scanner cannot read is an error, not a silent gap.
 *
 * `--check` writes nothing and exits 1 when the document is out of date; CI's drift check runs
 * `npm run generate` and fails on any difference, and test/observability/metrics-doc.test.ts
 * checks that every family a running mesh exports is listed.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const METRICS_DOC = "docs/metrics.md";
const KINDS = { Counter: "counter", Gauge: "gauge", Histogram: "histogram" } as const;

export interface MetricDef {
  name: string;
  type: (typeof KINDS)[keyof typeof KINDS];
  labels: string[];
  help: string;
  /** Project-relative source file. */
  file: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return name === "gen" || name === "node_modules" ? [] : sourceFiles(full);
    return full.endsWith(".ts") && !full.endsWith(".test.ts") && !full.endsWith(".d.ts") ? [full] : [];
  });
}

const STRING = /"((?:[^"\\]|\\.)*)"/y;

/** The object literal starting at text[open] ("{"), up to its matching "}", strings respected. */
function objectAt(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === "`" || c === "'") {
      const end = text.indexOf(c, i + 1);
      i = end < 0 ? text.length : end;
    } else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return text.slice(open, i + 1);
  }
  throw new Error("unterminated object literal");
}

/** A string value: a double-quoted literal (or literals joined by +), or a `const` of the file. */
function stringValue(expr: string, consts: Map<string, string>): string | undefined {
  const e = expr.trim();
  if (/^[A-Za-z_$][\w$]*$/.test(e)) return consts.get(e);
  const parts: string[] = [];
  let i = 0;
  while (i < e.length) {
    STRING.lastIndex = i;
    const m = STRING.exec(e);
    if (!m) return undefined;
    parts.push(JSON.parse(`"${m[1]}"`) as string);
    i = STRING.lastIndex;
    const plus = /^\s*\+\s*/.exec(e.slice(i));
    if (!plus) break;
    i += plus[0].length;
  }
  return i === e.length ? parts.join("") : undefined;
}

/** `key: value` (or shorthand `key`) inside an object literal's top level, as source text. */
function property(obj: string, key: string): string | undefined {
  const body = obj.slice(1, -1);
  let depth = 0;
  let start = 0;
  const entries: string[] = [];
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '"' || c === "`" || c === "'") {
      const end = body.indexOf(c, i + 1);
      i = end < 0 ? body.length : end;
    } else if (c === "{" || c === "[" || c === "(") depth++;
    else if (c === "}" || c === "]" || c === ")") depth--;
    else if (c === "," && depth === 0) entries.push(body.slice(start, i)), (start = i + 1);
  }
  entries.push(body.slice(start));
  for (const entry of entries) {
    const m = /^\s*([A-Za-z_$][\w$]*)\s*(?::([\s\S]*))?$/.exec(entry);
    if (m && m[1] === key) return m[2] ?? m[1];
  }
  return undefined;
}

/** Metric definitions in one file's text (`file` names it in errors and in the result). */
export function scanSource(file: string, text: string): MetricDef[] {
  const consts = new Map<string, string>();
  for (const m of text.matchAll(/\bconst ([A-Za-z_$][\w$]*)(?:: string)? = ("(?:[^"\\]|\\.)*");/g)) consts.set(m[1]!, JSON.parse(m[2]!) as string);
  const defs: MetricDef[] = [];
  for (const m of text.matchAll(/\bnew (Counter|Gauge|Histogram)\b(?:<[^>]*>)?\(\s*/g)) {
    const where = `${file}:${text.slice(0, m.index).split("\n").length}`;
    const open = m.index! + m[0].length;
    if (text[open] !== "{") throw new Error(`${where}: a metric defined without an object literal`);
    const obj = objectAt(text, open);
    const nameText = property(obj, "name");
    const helpText = property(obj, "help");
    const name = nameText === undefined ? undefined : stringValue(nameText, consts);
    const help = helpText === undefined ? undefined : stringValue(helpText, consts);
    if (name === undefined || help === undefined) throw new Error(`${where}: the metric's name and help must be string literals or consts of the file`);
    let labels: string[] = [];
    const labelsText = property(obj, "labelNames")
      ?.replace(/\s+as const\s*$/, "")
      .trim();
    if (labelsText !== undefined) {
      if (!labelsText.startsWith("[") || !labelsText.endsWith("]")) throw new Error(`${where}: labelNames must be an array literal`);
      const inner = labelsText.slice(1, -1).trim();
      labels =
        inner === ""
          ? []
          : inner
              .split(",")
              .filter((s) => s.trim() !== "")
              .map((s) => {
                const v = stringValue(s, consts);
                if (v === undefined) throw new Error(`${where}: a label name that is not a literal`);
                return v;
              });
    }
    defs.push({ name, type: KINDS[m[1] as keyof typeof KINDS], labels, help, file });
  }
  return defs;
}

/** Every metric defined under services/, sorted by name; a name defined twice must agree. */
export function scanServices(root = ROOT): MetricDef[] {
  const byName = new Map<string, MetricDef>();
  for (const full of sourceFiles(join(root, "services"))) {
    const file = relative(root, full).split(sep).join("/");
    for (const def of scanSource(file, readFileSync(full, "utf8"))) {
      const seen = byName.get(def.name);
      if (seen && (seen.type !== def.type || seen.labels.join() !== def.labels.join()))
        throw new Error(`${def.name} is defined twice with different types or labels (${seen.file}, ${def.file})`);
      if (!seen) byName.set(def.name, def);
    }
  }
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** Who exports a metric: the service folder it is defined in, or every service for shared code. */
function ownerOf(file: string): string {
  const service = file.split("/")[1] ?? "";
  return service === "shared" ? "every service" : service;
}

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\s+/g, " ").trim();

export function renderDoc(defs: MetricDef[]): string {
  const lines = [
    "# Metrics",
    "",
    "<!-- Generated by `npm run generate` (tools/generate-metrics-doc.ts) from the metric definitions under services/; do not edit by hand. -->",
    "",
    "Every railfence process serves Prometheus metrics on its metrics port (`/metrics`, plain HTTP;",
    "`/healthz`, `/readyz` beside it). Names follow [decision 057](decisions/057-metric-naming.md):",
    "`railfence_<component>_<what>[_<unit>]`, counters end in `_total`, label values are lower case,",
    "and every series carries `component` (the process: `rail-proxy`, `executor`, `lock`, `payouts`,",
    "`reconciler`, `rail-stub`). prom-client's process metrics (`process_*`, `nodejs_*`) come on top.",
    "The alerts built on these are in [runbooks.md](runbooks.md); renamed metrics are listed in decision 057.",
    "",
    "| metric | type | labels | exported by | meaning |",
    "| --- | --- | --- | --- | --- |",
    ...defs.map(
      (d) => `| \`${d.name}\` | ${d.type} | ${d.labels.length ? d.labels.map((l) => `\`${l}\``).join(", ") : "-"} | ${ownerOf(d.file)} | ${cell(d.help)} |`,
    ),
    "",
  ];
  return lines.join("\n");
}

function main(): void {
  const doc = renderDoc(scanServices());
  const path = join(ROOT, METRICS_DOC);
  const current = (() => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return "";
    }
  })();
  if (process.argv.includes("--check")) {
    if (current !== doc) {
      console.error(`${METRICS_DOC} is out of date: run npm run generate`);
      process.exit(1);
    }
    return;
  }
  if (current !== doc) writeFileSync(path, doc);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
