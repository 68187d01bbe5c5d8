/**
 * The harness stays out of the product (decision 064): no file under services/ names a harness
 * control variable or the harness's admission statement, and no function the migrations leave in
 * paydb takes a guard switch (a migration that once created one must drop it later; migrations
 * are history and are never rewritten). Negative controls: each checker, given a planted
 * violation, names it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONTROL_VARIABLES } from "../../tools/harness/controls/variables.js";

const ROOT = join(import.meta.dirname, "../..");
const HARNESS_NAMES = [...Object.values(CONTROL_VARIABLES).flat(), "harness_rail_admit"];

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = `${dir}/${name}`;
    if (statSync(join(ROOT, path)).isDirectory()) return name === "gen" || name === "node_modules" ? [] : files(path);
    return [path];
  });
}

/** The harness names `text` mentions. */
export function harnessNamesIn(text: string): string[] {
  return HARNESS_NAMES.filter((name) => text.includes(name));
}

/**
 * Functions that take a `*_guard boolean` parameter and are still there after every migration,
 * in order: [file, function].
 */
export function switchedFunctionsLeft(migrations: Array<[file: string, sql: string]>): string[] {
  const left = new Map<string, string>();
  for (const [file, sql] of migrations) {
    for (const m of sql.matchAll(/\bDROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?(\w+)\s*\(/gi)) left.delete(m[1]!.toLowerCase());
    for (const m of sql.matchAll(/\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)\s*\(([^)]*)\)/gi)) {
      const name = m[1]!.toLowerCase();
      if (/_guard\s+boolean/i.test(m[2]!)) left.set(name, file);
      else left.delete(name);
    }
  }
  return [...left].map(([name, file]) => `${file}: ${name}`);
}

const migrations = (kind: string): Array<[string, string]> =>
  readdirSync(join(ROOT, "migrations", kind))
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((f) => [`migrations/${kind}/${f}`, readFileSync(join(ROOT, "migrations", kind, f), "utf8")]);

describe("the harness stays out of the product", () => {
  it("no file under services/ names a harness control or the harness's admission", () => {
    const found = files("services").flatMap((f) => harnessNamesIn(readFileSync(join(ROOT, f), "utf8")).map((n) => `${f}: ${n}`));
    expect(found).toEqual([]);
  });

  it("no function left in paydb or lockdb by the migrations takes a guard switch", () => {
    expect(switchedFunctionsLeft(migrations("paydb"))).toEqual([]);
    expect(switchedFunctionsLeft(migrations("lockdb"))).toEqual([]);
  });

  it("negative controls: a planted name and a switch never dropped are named", () => {
    expect(harnessNamesIn('const off = process.env.RAIL_PROXY_DISABLED_GUARDS ?? "";')).toEqual(["RAIL_PROXY_DISABLED_GUARDS"]);
    expect(harnessNamesIn("SELECT * FROM harness_rail_admit($1)")).toEqual(["harness_rail_admit"]);
    const created = "CREATE FUNCTION rail_admit(p_reference text, p_mark_guard boolean) RETURNS void AS $$ $$;";
    expect(switchedFunctionsLeft([["007.sql", created]])).toEqual(["007.sql: rail_admit"]);
    expect(
      switchedFunctionsLeft([
        ["007.sql", created],
        ["019.sql", "DROP FUNCTION rail_admit(text, boolean);"],
      ]),
    ).toEqual([]);
    expect(
      switchedFunctionsLeft([
        ["007.sql", created],
        ["019.sql", "DROP FUNCTION rail_admit(text, boolean);"],
        ["020.sql", created.replace("CREATE", "CREATE OR REPLACE")],
      ]),
    ).toEqual(["020.sql: rail_admit"]);
  });
});
