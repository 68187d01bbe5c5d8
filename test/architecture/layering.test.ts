/**
 * The layers (docs/architecture.md): a service imports only its own folder and services/shared;
 * nothing in services/ imports the harness or the tests (the client library it may); only rail-proxy builds a rail client
 * (ADR-007 D1); the client library imports nothing of the services but generated code.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve, dirname, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/project-root.js";

const root = projectRoot();

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return name === "gen" || name === "node_modules" || name === "dist" ? [] : sources(full);
    return full.endsWith(".ts") && !full.endsWith(".d.ts") ? [full] : [];
  });
}

/** Relative imports of a file, resolved to project-relative paths. */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"';]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1] ?? m[2]!);
  return specs
    .filter((s) => s.startsWith("."))
    .map((s) =>
      relative(root, resolve(dirname(file), s))
        .split(sep)
        .join("/"),
    );
}

/** Layering problems among files (project-relative path -> its resolved imports). */
export function layeringProblems(graph: Map<string, string[]>): string[] {
  const problems: string[] = [];
  for (const [file, targets] of graph) {
    const [top, service] = file.split("/");
    for (const t of targets) {
      if (top === "services") {
        // The client library is product too (the CLI is built on it).
        if (t.startsWith("clients/typescript/src/")) continue;
        if (!t.startsWith("services/")) problems.push(`${file} imports ${t}: product code imports only product code`);
        else if (service !== "shared" && !t.startsWith(`services/${service}/`) && !t.startsWith("services/shared/"))
          problems.push(`${file} imports ${t}: a service imports only its own folder and services/shared`);
        else if (service === "shared" && !t.startsWith("services/shared/")) problems.push(`${file} imports ${t}: shared imports no service`);
      }
      if (top === "clients" && !t.startsWith("clients/")) problems.push(`${file} imports ${t}: the client library stands alone`);
    }
  }
  return problems;
}

const graph = new Map<string, string[]>();
for (const dir of ["services", "clients/typescript/src"]) {
  for (const f of sources(join(root, dir))) if (!f.endsWith(".test.ts")) graph.set(relative(root, f).split(sep).join("/"), imports(f));
}

describe("layers", () => {
  it("sees the code (premise)", () => {
    expect(graph.size).toBeGreaterThan(80);
    expect(graph.get("services/rail-proxy/rail-proxy.ts")).toContain("services/shared/pg.js");
  });

  it("no service imports another service, the harness or the tests; shared imports no service", () => {
    expect(layeringProblems(graph)).toEqual([]);
  });

  it("a planted cross-service import, harness import and shared->service import are each caught (negative control)", () => {
    const planted = new Map(graph);
    planted.set("services/executor/x.ts", ["services/rail-proxy/rail-client.js"]);
    planted.set("services/payouts/y.ts", ["tools/harness/mesh.js"]);
    planted.set("services/shared/z.ts", ["services/lock/config.js"]);
    expect(layeringProblems(planted)).toHaveLength(3);
  });

  it("only rail-proxy makes a client of the rail (ADR-007 D1); the rail-stub serves it", () => {
    const makers = [...graph.keys()].filter((f) => /createClient\(\s*RailService\b/.test(readFileSync(join(root, f), "utf8")));
    expect(makers).toEqual(["services/rail-proxy/rail-client.ts"]);
    const holders = [...graph.keys()].filter((f) => /RAIL_CREDENTIALS_FILE/.test(readFileSync(join(root, f), "utf8")));
    expect(
      holders.every((f) => f.startsWith("services/rail-proxy/") || f.startsWith("services/rail-stub/")),
      holders.join(", "),
    ).toBe(true);
  });
});

/**
 * services/shared's floors, lowest first (docs/architecture.md, "The floors of services/shared"):
 * a file imports its own floor or a lower one, never a higher one. Every shared file is on
 * exactly one floor, so a new file has to be placed.
 */
export const SHARED_FLOORS: [floor: string, files: string[]][] = [
  [
    "domain",
    [
      "reasons",
      "code-rule",
      "errors",
      "iso4217",
      "validation",
      "page-token",
      "payment-match",
      "rail-status",
      "rail-statement",
      "submission-ref",
      "submission-liveness",
      "limits",
    ],
  ],
  ["process", ["config", "project-root", "call-context", "logger", "tls", "token-signature", "process-config", "identity"]],
  ["observability", ["telemetry", "tracing", "instrumentation", "trace-file-exporter", "metrics", "rpc-metrics", "lifecycle"]],
  ["db", ["pg", "migrate", "db-roles"]],
  [
    "rpc",
    [
      "wire-protocol",
      "wire-check",
      "grpc-wire",
      "refusal",
      "send-gate",
      "grpc-unary-server",
      "grpc-unary-client",
      "client-transport",
      "proxy-pool",
      "reflection",
      "health",
    ],
  ],
  ["edge", ["request-body", "request-decode", "request-decompress", "request-gate", "request-stream", "gated-adapter", "authz", "server"]],
];

const floorOf = (file: string): number | undefined => {
  const m = /^services\/shared\/([a-z0-9-]+)\.(?:js|ts)$/.exec(file);
  return m ? SHARED_FLOORS.findIndex(([, files]) => files.includes(m[1]!)) : undefined;
};

/** Imports inside services/shared that go up a floor, and shared files on no floor. */
export function floorProblems(graph: Map<string, string[]>): string[] {
  const problems: string[] = [];
  for (const [file, targets] of graph) {
    const from = floorOf(file);
    if (from === undefined) continue;
    if (from === -1) {
      problems.push(`${file} is on no floor of services/shared (add it to SHARED_FLOORS)`);
      continue;
    }
    for (const t of targets) {
      const to = floorOf(t);
      if (to !== undefined && to > from) problems.push(`${file} (${SHARED_FLOORS[from]![0]}) imports ${t} (${SHARED_FLOORS[to]![0]}): arrows point down only`);
    }
  }
  return problems;
}

describe("the floors of services/shared", () => {
  it("every shared file is on one floor, and no import goes up a floor", () => {
    const names = SHARED_FLOORS.flatMap(([, files]) => files);
    expect(new Set(names).size, "a file on two floors").toBe(names.length);
    expect(floorProblems(graph)).toEqual([]);
  });

  it("a planted upward import and an unplaced file are caught (negative control)", () => {
    const planted = new Map(graph);
    planted.set("services/shared/errors.ts", [...(graph.get("services/shared/errors.ts") ?? []), "services/shared/server.js"]);
    planted.set("services/shared/new-helper.ts", []);
    expect(floorProblems(planted)).toEqual([
      "services/shared/errors.ts (domain) imports services/shared/server.js (edge): arrows point down only",
      "services/shared/new-helper.ts is on no floor of services/shared (add it to SHARED_FLOORS)",
    ]);
  });
});
