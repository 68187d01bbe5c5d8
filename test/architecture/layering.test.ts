/**
 * The layers (docs/architecture.md): a service imports only its own folder and services/shared;
 * nothing in services/ imports the harness or the tests (the client library it may); only rail-proxy builds a rail client
 * (ADR-007 D1); the client library imports nothing of the services but generated code.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve, dirname, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/process/project-root.js";

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
    expect(graph.get("services/rail-proxy/rail-proxy.ts")).toContain("services/shared/db/pg.js");
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
 * each floor is a sub-folder, and a file imports its own floor or a lower one, never a higher one.
 * A file directly in services/shared (outside gen/) is on no floor, so a new file has to be placed.
 */
export const SHARED_FLOORS = ["domain", "process", "observability", "db", "rpc", "edge"] as const;

/** The floor index of a services/shared file, -1 if it is on none, undefined if outside shared/. */
const floorOf = (file: string): number | undefined => {
  const m = /^services\/shared\/(?:([a-z]+)\/)?[a-z0-9.-]+\.(?:js|ts)$/.exec(file);
  if (!m || m[1] === "gen") return undefined;
  return m[1] === undefined ? -1 : SHARED_FLOORS.indexOf(m[1] as (typeof SHARED_FLOORS)[number]);
};

/** Imports inside services/shared that go up a floor, and shared files on no floor. */
export function floorProblems(graph: Map<string, string[]>): string[] {
  const problems: string[] = [];
  for (const [file, targets] of graph) {
    const from = floorOf(file);
    if (from === undefined) continue;
    if (from === -1) {
      problems.push(`${file} is on no floor of services/shared (move it into one of ${SHARED_FLOORS.join(", ")})`);
      continue;
    }
    for (const t of targets) {
      const to = floorOf(t);
      if (to !== undefined && to > from) problems.push(`${file} (${SHARED_FLOORS[from]}) imports ${t} (${SHARED_FLOORS[to]}): arrows point down only`);
    }
  }
  return problems;
}

describe("the floors of services/shared", () => {
  it("every shared file is on one floor, and no import goes up a floor", () => {
    const sharedFiles = [...graph.keys()].filter((f) => floorOf(f) !== undefined);
    expect(sharedFiles.length, "the graph sees services/shared").toBeGreaterThan(40);
    expect(floorProblems(graph)).toEqual([]);
  });

  it("a planted upward import and an unplaced file are caught (negative control)", () => {
    const planted = new Map(graph);
    planted.set("services/shared/domain/errors.ts", [...(graph.get("services/shared/domain/errors.ts") ?? []), "services/shared/edge/server.js"]);
    planted.set("services/shared/new-helper.ts", []);
    expect(floorProblems(planted)).toEqual([
      "services/shared/domain/errors.ts (domain) imports services/shared/edge/server.js (edge): arrows point down only",
      "services/shared/new-helper.ts is on no floor of services/shared (move it into one of domain, process, observability, db, rpc, edge)",
    ]);
  });
});
