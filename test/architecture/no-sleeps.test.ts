/**
 * No test sleeps to synchronise. A test waits with test/support/time.ts only: `eventually` for
 * a condition another process makes true, `quietFor` for a window in which something must not
 * happen, `letTimePass` for a condition that is time itself (a TTL, a deadline). A bare sleep
 * "so that it has happened" is a race a slower machine loses (two CI failures were such).
 *
 * Out of scope: test/bench (paces load on purpose) and test/cluster (the cluster driver, run by
 * hand: load pacing and kubectl polling; its polling helper is eventually() too).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const EXEMPT = new Set(["test/bench", "test/cluster", "test/support/time.ts"]);

const BARE_WAITS: { what: string; re: RegExp }[] = [
  { what: "a bare sleep call", re: /\bawait\s+sleep\s*\(/ },
  { what: "a promise around setTimeout", re: /await\s+new\s+Promise\s*(?:<[^>]*>)?\s*\(\s*\(?\s*(\w+)\s*\)?\s*=>\s*setTimeout\s*\(\s*\1\b/ },
  { what: "a sleep helper of its own", re: /\b(?:const|function)\s+sleep\b|=\s*\(\w*(?::\s*number)?\)\s*=>\s*new\s+Promise\b[^;]*setTimeout/ },
  { what: "node:timers/promises (use test/support/time.ts)", re: /from\s+["']node:timers\/promises["']/ },
];

function testFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = `${dir}/${name}`;
    if (EXEMPT.has(path)) return [];
    if (statSync(join(ROOT, path)).isDirectory()) return name === "node_modules" ? [] : testFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** The bare waits in `text`, as "line: what". */
export function bareWaits(text: string): string[] {
  return text.split("\n").flatMap((line, i) => BARE_WAITS.filter((w) => w.re.test(line)).map((w) => `${i + 1}: ${w.what}`));
}

describe("tests wait on events, or say why time itself is the condition", () => {
  it("no test file sleeps bare", () => {
    const files = testFiles("test");
    expect(files.length).toBeGreaterThan(100);
    const found = files.flatMap((f) => bareWaits(readFileSync(join(ROOT, f), "utf8")).map((w) => `${relative(ROOT, join(ROOT, f)).split(sep).join("/")}:${w}`));
    expect(found).toEqual([]);
  });

  it("catches each form of a bare sleep (negative controls)", () => {
    // Joined at run time so that this file holds none of them itself.
    const planted = (...parts: string[]) => parts.join("");
    expect(bareWaits(planted("await sl", "eep(500);"))).toHaveLength(1);
    expect(bareWaits(planted("await new Promise((r) => set", "Timeout(r, 200));"))).toHaveLength(1);
    expect(bareWaits(planted("await new Promise((resolve) => set", "Timeout(resolve, 50));"))).toHaveLength(1);
    expect(bareWaits(planted("const sl", "eep = (ms: number) => 0;"))).toHaveLength(1);
    expect(bareWaits(planted("const pause = (ms: number) => new Promise((r) => set", "Timeout(r, ms));"))).toHaveLength(1);
    expect(bareWaits(planted('import { setTimeout } from "node:timers', '/promises";'))).toHaveLength(1);
    expect(bareWaits('await quietFor(1500, "a second submission: none may happen");')).toEqual([]);
    expect(bareWaits("await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);")).toEqual([]);
  });
});
