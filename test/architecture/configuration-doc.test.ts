/**
 * docs/configuration.md lists exactly the settings each service's config schema reads: a setting
 * added, renamed or removed in a schema without its row (or a row left for a setting that is gone)
 * fails here. The settings every process shares are in the page's "Common to all" paragraph;
 * where a schema has a plain default, the row's default column states it.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { configSchema as executor } from "../../services/executor/config.js";
import { configSchema as lock } from "../../services/lock/config.js";
import { configSchema as payouts } from "../../services/payouts/config.js";
import { configSchema as railProxy } from "../../services/rail-proxy/config.js";
import { configSchema as railStub } from "../../services/rail-stub/config.js";
import { configSchema as reconciler } from "../../services/reconciler/config.js";

const ROOT = join(import.meta.dirname, "../..");
const SCHEMAS: Record<string, z.ZodObject> = { "rail-proxy": railProxy, "rail-stub": railStub, lock, payouts, executor, reconciler };
const COMMON = [
  "HOST",
  "PORT",
  "METRICS_PORT",
  "DRAIN_MS",
  "READ_TIMEOUT_MS",
  "RAILFENCE_CONNECT_UNARY",
  "TLS_CERT_FILE",
  "TLS_KEY_FILE",
  "TLS_CA_FILE",
  "TLS_CLIENT_AUTH",
  "TLS_RELOAD_INTERVAL_MS",
  "ALLOW_INSECURE",
];

interface Row {
  service: string;
  variables: string[];
  dflt: string;
}

/** The table rows: a service cell carries on to the rows below it that leave it empty. */
export function tableRows(doc: string): Row[] {
  const rows: Row[] = [];
  let service = "";
  for (const line of doc.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    if (cells.length < 5 || !line.startsWith("|") || cells[2]!.startsWith("---") || cells[2] === "variable") continue;
    if (cells[1]) service = cells[1];
    rows.push({ service, variables: [...cells[2]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!), dflt: cells[3]! });
  }
  return rows;
}

/** What the page gets wrong about `service`: settings missing, rows for settings that are not read, defaults not stated. */
export function configDocProblems(service: string, schema: z.ZodObject, doc: string): string[] {
  const keys = Object.keys(schema.shape).filter((k) => !COMMON.includes(k));
  const rows = tableRows(doc).filter((r) => r.service === service);
  const documented = new Map(rows.flatMap((r) => r.variables.map((v) => [v, r.dflt] as const)));
  const problems = [
    ...keys.filter((k) => !documented.has(k)).map((k) => `${service}: ${k} is read but not documented`),
    ...[...documented.keys()].filter((k) => !keys.includes(k) && !COMMON.includes(k)).map((k) => `${service}: ${k} is documented but not read`),
  ];
  for (const k of keys) {
    const parsed = (schema.shape[k] as z.ZodType).safeParse(undefined);
    const value = parsed.success ? parsed.data : undefined;
    // A default computed from the host (an id) is described, not quoted.
    const fromHost = typeof value === "string" && value.includes(hostname());
    const plain = !fromHost && (typeof value === "number" || (typeof value === "string" && value !== "")) ? String(value) : undefined;
    const stated = documented.get(k);
    if (plain !== undefined && stated !== undefined && !stated.replace(/[`,_ ]/g, "").includes(plain.replace(/[,_ ]/g, ""))) {
      problems.push(`${service}: ${k} defaults to ${plain}, the page says "${stated}"`);
    }
  }
  return problems;
}

const doc = readFileSync(join(ROOT, "docs", "configuration.md"), "utf8");

describe("the configuration reference (docs/configuration.md)", () => {
  it("documents every setting each service reads, and nothing else, with its default", () => {
    const problems = Object.entries(SCHEMAS).flatMap(([service, schema]) => configDocProblems(service, schema, doc));
    expect(problems).toEqual([]);
  });

  it("names every setting all processes share", () => {
    const common = doc.slice(0, doc.indexOf("| service |"));
    expect(COMMON.filter((k) => !common.includes(`\`${k}\``))).toEqual([]);
  });

  it("catches a setting without its row, a row without its setting, and a wrong default (negative controls)", () => {
    const withoutPool = doc.replace("| | `PAYDB_POOL_MAX` | 20 |", "| | `PAYDB_POOL_SIZE` | 20 |");
    expect(configDocProblems("rail-proxy", railProxy, withoutPool)).toEqual([
      "rail-proxy: PAYDB_POOL_MAX is read but not documented",
      "rail-proxy: PAYDB_POOL_SIZE is documented but not read",
    ]);
    const wrongDefault = doc.replace("| | `PAYDB_POOL_MAX` | 20 |", "| | `PAYDB_POOL_MAX` | 10 |");
    expect(configDocProblems("rail-proxy", railProxy, wrongDefault)).toEqual(['rail-proxy: PAYDB_POOL_MAX defaults to 20, the page says "10"']);
  });
});
