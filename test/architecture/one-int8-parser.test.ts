/**
 * One int8 parser: services read a 64-bit integer that arrives as text (pg's int8 columns, etcd
 * revisions, reference and setting digits) with services/shared/domain/int8.ts only, which refuses
 * what `BigInt()` would read wrongly ("" as 0n, " 1" as 1n, hex, values past int8). A bare
 * `BigInt(` in product code is a second parser.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
// int8.ts is the parser; errors.ts turns a number of milliseconds into seconds (not a parse).
const ALLOWED = new Set(["services/shared/domain/int8.ts", "services/shared/domain/errors.ts"]);

function productFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return name === "gen" ? [] : productFiles(full);
    return name.endsWith(".ts") && !name.endsWith(".test.ts") ? [relative(ROOT, full).split(sep).join("/")] : [];
  });
}

/** Lines of `text` that call BigInt( directly, as "line". */
export function bareBigInts(text: string): number[] {
  return text.split("\n").flatMap((line, i) => (/\bBigInt\(/.test(line) && !/^\s*(?:\/\/|\*)/.test(line) ? [i + 1] : []));
}

describe("one int8 parser", () => {
  it("no product file outside int8.ts parses with BigInt( directly", () => {
    const files = productFiles(join(ROOT, "services"));
    expect(files.length).toBeGreaterThan(100);
    const offenders = files.filter((f) => !ALLOWED.has(f)).flatMap((f) => bareBigInts(readFileSync(join(ROOT, f), "utf8")).map((l) => `${f}:${l}`));
    expect(offenders).toEqual([]);
  });

  it("a planted BigInt( read of a row is caught (negative control)", () => {
    expect(bareBigInts("const x = 1n;\n  fence: BigInt(r.fence),\n// BigInt( in a comment is prose")).toEqual([2]);
  });
});
