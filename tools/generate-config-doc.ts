/**
 * The `npm run generate` step for docs/configuration.md: the tables of every environment variable
 * the services read, written from their zod config schemas (each config module exports
 * `configSchema`; the settings every process shares come from processEnvShape / serverEnvShape
 * and tlsEnvShape), so a setting cannot be added, renamed, re-defaulted or removed without the
 * page following.
 *
 * - default and values come from the schema (z.toJSONSchema, input side): its default, else
 *   "required" when the schema has none and needs one, else "—" (optional, unset). A default the
 *   code computes (from the host, or from other settings) is stated with an `@default <text>` tag
 *   in the field's comment; a default that names this host without such a tag is an error.
 * - the meaning is the field's `/** ... *\/` comment in the schema's source file (the comment right
 *   above `KEY:`; line comments in between are skipped). A variable without one is an error naming
 *   the service and the variable: a new setting cannot go undocumented. In the comments,
 *   "decision NNN" and "docs/<page>.md" become links, and the names of settings get backticks.
 *
 * The generator owns only the region of docs/configuration.md between BEGIN and END below; the
 * prose around it is written by hand. `--check` writes nothing and exits 1 when the page is out of
 * date (CI's drift check runs `npm run generate` and fails on any difference;
 * test/architecture/config-doc.test.ts checks it too).
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { configSchema as executor } from "../services/executor/config.js";
import { configSchema as lock } from "../services/lock/config.js";
import { configSchema as migrate } from "../services/migrate/config.js";
import { configSchema as payouts } from "../services/payouts/config.js";
import { configSchema as railProxy } from "../services/rail-proxy/config.js";
import { configSchema as railStub } from "../services/rail-stub/config.js";
import { configSchema as reconciler } from "../services/reconciler/config.js";
import { serverEnvShape } from "../services/shared/process/process-config.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const CONFIG_DOC = "docs/configuration.md";
export const BEGIN = "<!-- generated: npm run generate (tools/generate-config-doc.ts) -->";
export const END = "<!-- end of generated part -->";

export interface ServiceConfig {
  name: string;
  schema: z.ZodObject;
  /** Project-relative file whose comments describe the schema's own fields. */
  source: string;
}

export const SERVICES: ServiceConfig[] = [
  { name: "rail-proxy", schema: railProxy, source: "services/rail-proxy/config.ts" },
  { name: "rail-stub", schema: railStub, source: "services/rail-stub/config.ts" },
  { name: "lock", schema: lock, source: "services/lock/config.ts" },
  { name: "payouts", schema: payouts, source: "services/payouts/config.ts" },
  { name: "executor", schema: executor, source: "services/executor/config.ts" },
  { name: "reconciler", schema: reconciler, source: "services/reconciler/config.ts" },
  { name: "migrate", schema: migrate, source: "services/migrate/config.ts" },
];

/** The settings every process shares (a server's set is the largest), and where they are described. */
export const SHARED_KEYS = Object.keys(serverEnvShape(0, 0));
export const SHARED_SOURCES = ["services/shared/process/process-config.ts", "services/shared/process/tls.ts"];

export class ConfigDocError extends Error {
  constructor(readonly problems: string[]) {
    super(`docs/configuration.md cannot be generated:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigDocError";
  }
}

export interface FieldDoc {
  text: string;
  /** The `@default` tag, for a default the code computes. */
  dflt?: string;
}

const FIELD = /^\s*([A-Z][A-Z0-9_]*):(\s|$)/;

/** The comment right above each `KEY:` of a schema in `source` (interface members, `KEY: T;`, are not fields). */
export function fieldDocs(file: string, source: string): Map<string, FieldDoc> {
  const lines = source.split("\n");
  const docs = new Map<string, FieldDoc>();
  const seen = new Set<string>();
  lines.forEach((line, i) => {
    const key = FIELD.exec(line)?.[1];
    if (!key || line.trimEnd().endsWith(";")) return;
    if (seen.has(key)) throw new ConfigDocError([`${file}: ${key} is defined twice; cannot tell which comment describes it`]);
    seen.add(key);
    let j = i - 1;
    while (j >= 0 && lines[j]!.trim().startsWith("//")) j--;
    if (j < 0 || !lines[j]!.trim().endsWith("*/")) return;
    let k = j;
    while (k >= 0 && !lines[k]!.includes("/**")) k--;
    if (k < 0) return;
    const body = lines
      .slice(k, j + 1)
      .join("\n")
      .replace(/^\s*\/\*\*/, "")
      .replace(/\*\/\s*$/, "")
      .split("\n")
      .map((l) => l.replace(/^\s*\*?\s?/, ""))
      .join(" ");
    const [text, dflt] = body.split(/@default\b/).map((s) => s.replace(/\s+/g, " ").trim());
    docs.set(key, dflt === undefined ? { text: text! } : { text: text!, dflt });
  });
  return docs;
}

interface Prop {
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  format?: string;
}

function inputSchema(schema: z.ZodObject): { properties: Record<string, Prop>; required: string[] } {
  const js = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as { properties?: Record<string, Prop>; required?: string[] };
  return { properties: js.properties ?? {}, required: js.required ?? [] };
}

const decisions = readdirSync(join(ROOT, "docs", "decisions"));

const UNITS: [number, string][] = [
  [86_400_000, "day"],
  [3_600_000, "h"],
  [60_000, "min"],
];

function formatValue(key: string, v: unknown): string {
  if (typeof v === "number") {
    const unit = key.endsWith("_MS") ? UNITS.find(([ms]) => v >= ms && v % ms === 0) : undefined;
    if (!unit) return String(v);
    const n = v / unit[0];
    return `${v} (${n} ${unit[1]}${unit[1] === "day" && n !== 1 ? "s" : ""})`;
  }
  if (v === "") return "unset";
  return `\`${String(v)}\``;
}

function valuesOf(p: Prop): string {
  if (p.enum) return p.enum.map((v) => (v === "" ? "unset" : `\`${String(v)}\``)).join(", ");
  if (p.minimum !== undefined && p.maximum !== undefined) return `${p.minimum}–${p.maximum}`;
  if (p.format === "uri") return "URL";
  return "";
}

/** Markdown for a comment: links for decisions and pages, backticks for settings, no stray pipes. */
function meaningOf(text: string, settings: Set<string>, where: string, problems: string[]): string {
  return text
    .replace(/\|/g, "\\|")
    .replace(/\bdecision (\d{3})\b/g, (all, n: string) => {
      const file = decisions.find((f) => f.startsWith(`${n}-`));
      if (!file) problems.push(`${where}: names decision ${n}, which docs/decisions/ does not have`);
      return file ? `[decision ${n}](decisions/${file})` : all;
    })
    .replace(/\bdocs\/([\w./-]+\.md)(#[\w-]+)?/g, (all, page: string, anchor: string | undefined) => {
      if (!existsSync(join(ROOT, "docs", page))) problems.push(`${where}: names ${all}, which does not exist`);
      return `[docs/${page}](${page}${anchor ?? ""})`;
    })
    .replace(/(?<![`\w])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![`\w])/g, (name) => (settings.has(name) ? `\`${name}\`` : name));
}

function defaultOf(key: string, p: Prop, required: boolean, doc: FieldDoc | undefined, where: string, problems: string[]): string {
  if (doc?.dflt) return doc.dflt;
  if (p.default === undefined) return required ? "required" : "—";
  if (typeof p.default === "string" && (p.default.includes(hostname()) || p.default.includes(String(process.pid)))) {
    problems.push(`${where}: the default depends on this host; state it with an @default tag in its comment`);
  }
  return formatValue(key, p.default);
}

const row = (cells: string[]) => `|${cells.map((c) => (c ? ` ${c} ` : " ")).join("|")}|`;

/** The generated part of the page; throws ConfigDocError listing every variable it cannot describe. */
export function renderTables(services: ServiceConfig[] = SERVICES, read: (file: string) => string = readSource): string {
  const problems: string[] = [];
  const settings = new Set(services.flatMap((s) => Object.keys(s.schema.shape)));
  const inputs = new Map(services.map((s) => [s.name, inputSchema(s.schema)]));
  const sharedDocs = new Map(SHARED_SOURCES.flatMap((f) => [...fieldDocs(f, read(f))]));

  const shared = [row(["variable", "read by", "default", "values", "meaning"]), row(["---", "---", "---", "---", "---"])];
  const sharing = services.filter((s) => SHARED_KEYS.some((k) => k in s.schema.shape));
  for (const key of SHARED_KEYS) {
    const readers = sharing.filter((s) => key in s.schema.shape);
    if (readers.length === 0) continue;
    const where = `every service: ${key}`;
    const doc = sharedDocs.get(key);
    if (!doc?.text) problems.push(`${where} has no description (a /** ... */ comment above it in ${SHARED_SOURCES.join(" or ")})`);
    const defaults = readers.map((s) => {
      const { properties, required } = inputs.get(s.name)!;
      return defaultOf(key, properties[key]!, required.includes(key), doc, where, problems);
    });
    const dflt = new Set(defaults).size === 1 ? defaults[0]! : readers.map((s, i) => `${s.name} ${defaults[i]}`).join(", ");
    const readBy = readers.length === sharing.length ? "all" : readers.map((s) => s.name).join(", ");
    const p = inputs.get(readers[0]!.name)!.properties[key]!;
    shared.push(row([`\`${key}\``, readBy, dflt, valuesOf(p), meaningOf(doc?.text ?? "", settings, where, problems)]));
  }

  const own = [row(["service", "variable", "default", "values", "meaning"]), row(["---", "---", "---", "---", "---"])];
  for (const s of services) {
    const docs = fieldDocs(s.source, read(s.source));
    const { properties, required } = inputs.get(s.name)!;
    const keys = Object.keys(s.schema.shape).filter((k) => !SHARED_KEYS.includes(k));
    keys.forEach((key, i) => {
      const where = `${s.name}: ${key}`;
      const doc = docs.get(key);
      if (!doc?.text) problems.push(`${where} has no description (a /** ... */ comment above it in ${s.source})`);
      const p = properties[key]!;
      own.push(
        row([
          i === 0 ? s.name : "",
          `\`${key}\``,
          defaultOf(key, p, required.includes(key), doc, where, problems),
          valuesOf(p),
          meaningOf(doc?.text ?? "", settings, where, problems),
        ]),
      );
    });
  }
  if (problems.length > 0) throw new ConfigDocError(problems);

  const notShared = services.filter((s) => !sharing.includes(s)).map((s) => s.name);
  return [
    "## Every service",
    "",
    `The settings all processes share${notShared.length ? ` (${notShared.join(", ")} reads none of them)` : ""}; "all" is ${sharing.map((s) => s.name).join(", ")}.`,
    "",
    ...shared,
    "",
    "## Each service's own",
    "",
    ...own,
  ].join("\n");
}

/** `current` with its generated region replaced by what the schemas say now. */
export function renderDoc(current: string, services: ServiceConfig[] = SERVICES, read: (file: string) => string = readSource): string {
  const start = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  if (start < 0 || end < start) throw new ConfigDocError([`${CONFIG_DOC} has no ${BEGIN} ... ${END} region`]);
  return `${current.slice(0, start + BEGIN.length)}\n\n${renderTables(services, read)}\n\n${current.slice(end)}`;
}

function readSource(file: string): string {
  return readFileSync(join(ROOT, file), "utf8");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = join(ROOT, CONFIG_DOC);
  const current = readFileSync(path, "utf8");
  let next: string;
  try {
    next = renderDoc(current);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
  if (process.argv.includes("--check")) {
    if (next !== current) {
      console.error(`${CONFIG_DOC} is out of date: run npx tsx tools/generate-config-doc.ts`);
      process.exit(1);
    }
  } else if (next !== current) {
    writeFileSync(path, next);
    console.log(`wrote ${CONFIG_DOC}`);
  } else {
    console.log(`${CONFIG_DOC} is up to date`);
  }
}
