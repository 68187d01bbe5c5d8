/**
 * clients/typescript is publishable on its own, proved the way a consumer gets it: `npm pack`
 * builds the tarball from the package's own folder (its tsconfig, its generated code), and the
 * tarball is installed with `npm install --offline` into a fresh project outside the repository,
 * beside tarballs of its declared dependencies only (packed from the versions it pins). The
 * consumer then imports `@railfence/client` by name and uses it. Nothing resolves through the
 * repository's own node_modules, so an undeclared dependency or a file missing from the tarball
 * fails here; the negative control shows it (a dependency dropped from package.json).
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/project-root.js";

const pkgDir = join(projectRoot(), "clients", "typescript");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as {
  name: string;
  version: string;
  dependencies: Record<string, string>;
  exports: Record<string, { types: string; import: string }>;
};

let dir: string;
let tarball: string;
/** Tarballs of the declared dependencies, by name. */
const deps = new Map<string, string>();

const npm = (args: string[], cwd: string) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "railfence-client-pack-"));
  const out = npm(["pack", "--pack-destination", dir, "--json", "--ignore-scripts=false"], pkgDir);
  const [packed] = JSON.parse(out.slice(out.indexOf("["))) as Array<{ filename: string }>;
  tarball = join(dir, packed!.filename);
  for (const [name, version] of Object.entries(pkg.dependencies)) {
    const source = join(projectRoot(), "node_modules", name);
    const installed = JSON.parse(readFileSync(join(source, "package.json"), "utf8")) as { version: string };
    // The tarball we install must be the version the package pins, not whatever is at hand.
    expect(installed.version, name).toBe(version);
    const res = JSON.parse(npm(["pack", source, "--pack-destination", dir, "--json", "--ignore-scripts"], dir)) as Array<{ filename: string }>;
    deps.set(name, join(dir, res[0]!.filename));
  }
});

afterAll(() => {
  rmSync(join(pkgDir, "dist"), { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A fresh consumer project with these tarballs installed offline; returns its folder. */
function consumer(name: string, tarballs: string[]): string {
  const app = join(dir, name);
  mkdirSync(app, { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name, version: "1.0.0", private: true, type: "module" }));
  npm(["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", ...tarballs], app);
  return app;
}

function walk(d: string): string[] {
  return readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [join(d, f)]));
}

/** Runs an ES module script inside app (so imports resolve from app/node_modules only). */
function runIn(app: string, script: string): string {
  const file = join(app, "use.mjs");
  writeFileSync(file, script);
  return execFileSync(process.execPath, [file], { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

const USE = `
import { createRailfenceClient, IntentMismatchError } from "@railfence/client";
const where = import.meta.resolve("@railfence/client");
const m = await import("@railfence/client");
// The default key store of the installed build: one intent id, one key; a changed body refused.
const rf = createRailfenceClient({ payoutsUrl: "http://127.0.0.1:1" });
const body = { accountId: "a", amount: { amountMinor: 5n, currency: "EUR" }, beneficiary: "b" };
const a = await rf.payouts.intent(body, { id: "order-1" });
const b = await rf.payouts.intent(body, { id: "order-1" });
let mismatch = false;
try { await rf.payouts.intent({ ...body, amount: { amountMinor: 6n, currency: "EUR" } }, { id: "order-1" }); } catch (e) { mismatch = e instanceof IntentMismatchError; }
rf.close();
console.log(JSON.stringify({ where, names: Object.keys(m).sort(), sameKey: a.key === b.key, mismatch }));
`;

describe("@railfence/client, packed and installed", () => {
  it("the tarball holds compiled JS, declarations, its README and package.json, nothing else", () => {
    const files = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" })
      .trim()
      .split("\n")
      .map((f) => f.replace(/^package\//, ""));
    expect(files).toContain("README.md");
    expect(files).toContain("package.json");
    expect(files).toContain(pkg.exports["."]!.import.replace(/^\.\//, ""));
    expect(files).toContain(pkg.exports["."]!.types.replace(/^\.\//, ""));
    expect(files.filter((f) => !f.startsWith("dist/") && f !== "README.md" && f !== "package.json")).toEqual([]);
    expect(files.some((f) => f.includes(".test."))).toBe(false);
  });

  it("installs offline from the tarball with only its declared dependencies, and the consumer imports and uses it by name", () => {
    const app = consumer("app", [tarball, ...deps.values()]);
    const installed = join(app, "node_modules", "@railfence", "client");
    expect(JSON.parse(readFileSync(join(installed, "package.json"), "utf8"))).toMatchObject({ name: pkg.name, version: pkg.version });
    // Every bare import of the installed build is a declared dependency (pinned exactly) or a built-in.
    for (const v of Object.values(pkg.dependencies)) expect(v).toMatch(/^\d+\.\d+\.\d+$/);
    const bare = new Set<string>();
    for (const f of walk(join(installed, "dist")).filter((p) => p.endsWith(".js"))) {
      for (const m of readFileSync(f, "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^".][^"]*)"/g)) bare.add(m[1]!);
    }
    expect(bare.size).toBeGreaterThan(0);
    for (const spec of bare) {
      if (spec.startsWith("node:") || builtinModules.includes(spec)) continue;
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
      expect(Object.keys(pkg.dependencies), `${spec} is imported but not a dependency`).toContain(name);
    }
    const used = JSON.parse(runIn(app, USE)) as { where: string; names: string[]; sameKey: boolean; mismatch: boolean };
    expect(used.where.startsWith(`file://${installed}`)).toBe(true); // the installed copy, not the repository's
    for (const n of [
      "createRailfenceClient",
      "FileKeyStore",
      "MemoryKeyStore",
      "RailfenceError",
      "OutcomeUnknownError",
      "PayoutService",
      "RailProxyService",
      "PayoutState",
      "tlsFromFiles",
      "classifyOutcome",
    ])
      expect(used.names).toContain(n);
    expect(used).toMatchObject({ sameKey: true, mismatch: true });
  });

  it("negative control: a package that forgets to declare a dependency installs, and its import fails in the consumer", () => {
    const broken = join(dir, "broken-src");
    mkdirSync(join(dir, "broken-pack"), { recursive: true });
    mkdirSync(broken, { recursive: true });
    const dropped = "@opentelemetry/api";
    const { [dropped]: _gone, ...rest } = pkg.dependencies;
    writeFileSync(join(broken, "package.json"), JSON.stringify({ ...pkg, dependencies: rest, scripts: {} }));
    cpSync(join(pkgDir, "README.md"), join(broken, "README.md"));
    cpSync(join(pkgDir, "dist"), join(broken, "dist"), { recursive: true });
    const res = JSON.parse(npm(["pack", broken, "--pack-destination", join(dir, "broken-pack"), "--json", "--ignore-scripts"], dir)) as Array<{
      filename: string;
    }>;
    const app = consumer("broken-app", [join(dir, "broken-pack", res[0]!.filename), ...[...deps.entries()].filter(([n]) => n !== dropped).map(([, t]) => t)]);
    expect(() => runIn(app, USE)).toThrow(/Cannot find package '@opentelemetry\/api'/);
  });
});
