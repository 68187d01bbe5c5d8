/**
 * clients/typescript is publishable on its own: `npm pack` builds it from its own folder
 * (its tsconfig, its generated code), ships compiled JS with type declarations and its README
 * and nothing else, every module it imports is a declared dependency (or a Node built-in), and
 * the packed entry point loads and exports the API.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/project-root.js";

const pkgDir = join(projectRoot(), "clients", "typescript");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as {
  name: string;
  dependencies: Record<string, string>;
  exports: Record<string, { types: string; import: string }>;
};

afterAll(() => rmSync(join(pkgDir, "dist"), { recursive: true, force: true }));

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? walk(join(dir, f)) : [join(dir, f)]));
}

describe("@railfence/client package", () => {
  it("packs compiled JS, declarations and its README from its own folder", () => {
    const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts=false"], { cwd: pkgDir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    const [packed] = JSON.parse(out.slice(out.indexOf("["))) as Array<{ name: string; files: Array<{ path: string }> }>;
    const files = packed!.files.map((f) => f.path);
    expect(packed!.name).toBe("@railfence/client");
    expect(files).toContain("README.md");
    expect(files).toContain("package.json");
    expect(files).toContain(pkg.exports["."]!.import.replace(/^\.\//, ""));
    expect(files).toContain(pkg.exports["."]!.types.replace(/^\.\//, ""));
    expect(files.filter((f) => !f.startsWith("dist/") && f !== "README.md" && f !== "package.json")).toEqual([]);
    expect(files.some((f) => f.includes(".test."))).toBe(false);
  });

  it("imports only its declared dependencies (pinned exactly) and Node built-ins", () => {
    for (const v of Object.values(pkg.dependencies)) expect(v).toMatch(/^\d+\.\d+\.\d+$/);
    const bare = new Set<string>();
    for (const f of walk(join(pkgDir, "dist")).filter((p) => p.endsWith(".js"))) {
      for (const m of readFileSync(f, "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^".][^"]*)"/g)) bare.add(m[1]!);
    }
    expect(bare.size).toBeGreaterThan(0);
    for (const spec of bare) {
      if (spec.startsWith("node:") || builtinModules.includes(spec)) continue;
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
      expect(Object.keys(pkg.dependencies), `${spec} is imported but not a dependency`).toContain(name);
    }
  });

  it("the packed entry point loads and exports the API", () => {
    const entry = join(pkgDir, pkg.exports["."]!.import);
    const names = execFileSync(process.execPath, ["--input-type=module", "-e", `const m = await import(${JSON.stringify(entry)}); console.log(Object.keys(m).sort().join(","))`], { encoding: "utf8" }).trim().split(",");
    for (const n of ["createRailfenceClient", "FileKeyStore", "MemoryKeyStore", "RailfenceError", "OutcomeUnknownError", "PayoutService", "RailProxyService", "PayoutState", "tlsFromFiles"]) expect(names).toContain(n);
  });
});
