/**
 * The fast tier (vitest.unit.config.ts, `npm run test:unit`) starts nothing: no test file in it
 * may import the harness that starts processes and databases, the test mesh, or ask the global
 * setup for a database (inject). A file that needs them belongs to the full tier only.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { UNIT_TESTS } from "../../vitest.unit.config.js";

const ROOT = join(import.meta.dirname, "../..");
// Imports only (a path inside a string, e.g. a planted layering violation, starts nothing).
const STARTS_THINGS = [
  /(?:from|import\()\s*["'][^"']*tools\/harness\/(?:mesh|postgres|service-process|etcd|etcd-cluster|replicated-paydb)\.js["']/,
  /(?:from|import\()\s*["'][^"']*support\/test-mesh\.js["']/,
  /\binject\b[^;]*from\s*["']vitest["']/,
];

/** Project files matching a vitest include pattern (`**` any folders, `*` within a name). */
function matching(pattern: string): string[] {
  const re = new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*\*\//g, "@@")
      .replace(/\*/g, "[^/]*")
      .replace(/@@/g, "(?:.*/)?")}$`,
  );
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) return ["node_modules", "dist", ".git", ".cluster", ".tools"].includes(name) ? [] : walk(full);
      return [relative(ROOT, full).split(sep).join("/")];
    });
  const top = pattern.split("/")[0]!;
  return walk(join(ROOT, top)).filter((f) => re.test(f));
}

/** What in `text` would start a process or need a database. */
export function startsThings(text: string): string[] {
  return STARTS_THINGS.filter((re) => re.test(text)).map((re) => re.source);
}

describe("the unit tier", () => {
  const files = UNIT_TESTS.flatMap(matching);

  it("holds the in-process tests, and none of them starts a process or needs a database", () => {
    expect(files.length).toBeGreaterThanOrEqual(30);
    const offenders = files.flatMap((f) => startsThings(readFileSync(join(ROOT, f), "utf8")).map((why) => `${f}: ${why}`));
    expect(offenders).toEqual([]);
  });

  it("the check catches a test that starts a mesh (negative control)", () => {
    // Built by joining so that this file itself imports nothing it names.
    const planted = (...parts: string[]) => parts.join(" ");
    expect(startsThings(planted("import { testMesh } from", '"../support/test-mesh.js";'))).toHaveLength(1);
    expect(startsThings(planted("import { inject } from", '"vitest";'))).toHaveLength(1);
    expect(startsThings(planted("const m = await import(", '"../../tools/harness/mesh.js");'))).toHaveLength(1);
    expect(startsThings('planted.set("services/payouts/y.ts", ["tools/harness/mesh.js"]);')).toEqual([]);
  });
});
