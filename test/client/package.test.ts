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
import { projectRoot } from "../../services/shared/process/project-root.js";
import { countPayouts, createPaydb, dropPaydb, startPayouts } from "../payouts/support.js";

const pkgDir = join(projectRoot(), "clients", "typescript");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as {
  name: string;
  version: string;
  dependencies: Record<string, string>;
  exports: Record<string, { types: string; default: string }>;
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
function consumer(name: string, tarballs: string[], type: "module" | "commonjs" = "module"): string {
  const appDir = join(dir, name);
  mkdirSync(appDir, { recursive: true });
  writeFileSync(join(appDir, "package.json"), JSON.stringify({ name, version: "1.0.0", private: true, type }));
  npm(["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", ...tarballs], appDir);
  return appDir;
}

/** The ES module consumer with the real tarball, installed once for the tests that use it. */
let installedApp: string | undefined;
function app(): string {
  installedApp ??= consumer("app", [tarball, ...deps.values()]);
  return installedApp;
}

function walk(d: string): string[] {
  return readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [join(d, f)]));
}

/** Runs a script inside app (so imports resolve from app/node_modules only): ES module, or CommonJS. */
function runIn(appDir: string, script: string, file = "use.mjs", env: Record<string, string> = {}): string {
  writeFileSync(join(appDir, file), script);
  return execFileSync(process.execPath, [join(appDir, file)], {
    cwd: appDir,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  }).trim();
}

/** The same use from CommonJS: require() of the package by name (Node >= 20.19 loads its ES modules). */
const USE_CJS = `
const { createRailfenceClient, REASONS } = require("@railfence/client");
const rf = createRailfenceClient({ payoutsUrl: "http://127.0.0.1:1" });
rf.payouts.intent({ accountId: "a", amount: { amountMinor: 5n, currency: "EUR" }, beneficiary: "b" }, { id: "order-1" }).then((i) => {
  rf.close();
  console.log(JSON.stringify({ key: typeof i.key, reason: REASONS.FENCED_OUT.reason }));
});
`;

/** Against a running payouts service: one intent created twice is one payout; it serialises to JSON. */
const USE_MESH = `
import { createRailfenceClient, payoutToJson } from "@railfence/client";
const rf = createRailfenceClient({ payoutsUrl: process.env.PAYOUTS_URL });
const intent = await rf.payouts.intent({ accountId: "acct-packed", amount: { amountMinor: 1234n, currency: "EUR" }, beneficiary: "ben-packed" }, { id: "packed-1" });
const first = await intent.submit();
const again = await rf.payouts.intent({ accountId: "acct-packed", amount: { amountMinor: 1234n, currency: "EUR" }, beneficiary: "ben-packed" }, { id: "packed-1" }).then((i) => i.submit());
const read = await rf.payouts.get(first.payout.payoutId);
rf.close();
console.log(JSON.stringify({ first: payoutToJson(first.payout), replayed: again.replayed, same: again.payout.payoutId === first.payout.payoutId, read: read.payoutId }));
`;

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
    expect(files).toContain(pkg.exports["."]!.default.replace(/^\.\//, ""));
    expect(files).toContain(pkg.exports["."]!.types.replace(/^\.\//, ""));
    expect(files.filter((f) => !f.startsWith("dist/") && f !== "README.md" && f !== "package.json")).toEqual([]);
    expect(files.some((f) => f.includes(".test."))).toBe(false);
  });

  it("installs offline from the tarball with only its declared dependencies, and the consumer imports and uses it by name", () => {
    const installed = join(app(), "node_modules", "@railfence", "client");
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
    const used = JSON.parse(runIn(app(), USE)) as { where: string; names: string[]; sameKey: boolean; mismatch: boolean };
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
    const brokenApp = consumer("broken-app", [
      join(dir, "broken-pack", res[0]!.filename),
      ...[...deps.entries()].filter(([n]) => n !== dropped).map(([, t]) => t),
    ]);
    expect(() => runIn(brokenApp, USE)).toThrow(/Cannot find package '@opentelemetry\/api'/);
  });
  it("a CommonJS consumer requires it by name; with an import-only exports map it could not (control)", () => {
    const cjsApp = consumer("cjs-app", [tarball, ...deps.values()], "commonjs");
    expect(JSON.parse(runIn(cjsApp, USE_CJS, "use.cjs"))).toEqual({ key: "string", reason: "FENCED_OUT" });
    // Control: the same build whose exports map names only the "import" condition.
    const importOnly = join(dir, "import-only-src");
    mkdirSync(join(dir, "import-only-pack"), { recursive: true });
    mkdirSync(importOnly, { recursive: true });
    const exportsImportOnly = { ".": { types: pkg.exports["."]!.types, import: pkg.exports["."]!.default } };
    writeFileSync(join(importOnly, "package.json"), JSON.stringify({ ...pkg, exports: exportsImportOnly, scripts: {} }));
    cpSync(join(pkgDir, "README.md"), join(importOnly, "README.md"));
    cpSync(join(pkgDir, "dist"), join(importOnly, "dist"), { recursive: true });
    const res = JSON.parse(npm(["pack", importOnly, "--pack-destination", join(dir, "import-only-pack"), "--json", "--ignore-scripts"], dir)) as Array<{
      filename: string;
    }>;
    const broken = consumer("cjs-broken-app", [join(dir, "import-only-pack", res[0]!.filename), ...deps.values()], "commonjs");
    expect(() => runIn(broken, USE_CJS, "use.cjs")).toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED|No "exports" main defined/);
  });

  it("the installed package works against a running payouts service: an intent sent twice is one payout, readable, and serialises to JSON", async () => {
    const paydb = await createPaydb();
    const payouts = await startPayouts(paydb, {}, "payouts-packed");
    try {
      const out = JSON.parse(runIn(app(), USE_MESH, "mesh.mjs", { PAYOUTS_URL: payouts.url })) as {
        first: { payoutId: string; accountId: string; amount: { amountMinor: string } };
        replayed: boolean;
        same: boolean;
        read: string;
      };
      expect(out.first).toMatchObject({ accountId: "acct-packed", amount: { amountMinor: "1234" } });
      expect(out).toMatchObject({ replayed: true, same: true, read: out.first.payoutId });
      expect(await countPayouts(paydb, "account_id = 'acct-packed'")).toBe(1);
    } finally {
      await payouts.stop(5000);
      await dropPaydb(paydb);
    }
  });
});
