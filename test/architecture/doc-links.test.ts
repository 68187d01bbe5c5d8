/**
 * The README is a map: every relative link in it and in docs/ (and the services' and the model's
 * READMEs) reaches a file that exists, and an anchor reaches a heading of that file. A page
 * moved or a section renamed without its links fails here.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

function markdownFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return markdownFiles(path);
    return name.endsWith(".md") ? [path] : [];
  });
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, "")
    .replace(/[^\p{L}\p{N} -]/gu, "")
    .replace(/ /g, "-");
}

function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.+)$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The broken relative links of the markdown file `file` (a project-relative path). */
export function brokenLinks(
  file: string,
  text: string,
  exists = (p: string) => existsSync(join(ROOT, p)),
  read = (p: string) => readFileSync(join(ROOT, p), "utf8"),
): string[] {
  const broken: string[] = [];
  const prose = text.replace(/```[\s\S]*?```/g, "");
  for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/.test(target)) continue;
    const [path, anchor] = target.split("#") as [string, string | undefined];
    const resolved = path === "" ? file : normalize(join(dirname(file), path));
    if (relative(ROOT, join(ROOT, resolved)).startsWith("..") || !exists(resolved)) {
      broken.push(`${target} (no such file)`);
      continue;
    }
    if (anchor && resolved.endsWith(".md") && !anchors(path === "" ? text : read(resolved)).has(anchor)) broken.push(`${target} (no such heading)`);
  }
  return broken;
}

describe("documentation links", () => {
  it("README.md is a map of at most 250 lines", () => {
    expect(readFileSync(join(ROOT, "README.md"), "utf8").split("\n").length).toBeLessThanOrEqual(250);
  });

  it("every relative link in README.md, docs/, services/ and model/ READMEs reaches its file and heading", () => {
    const files = ["README.md", "model/README.md", ...markdownFiles("docs"), ...markdownFiles("services").filter((f) => !f.includes("/gen/"))];
    const broken = files.flatMap((f) => brokenLinks(f, readFileSync(join(ROOT, f), "utf8")).map((b) => `${f}: ${b}`));
    expect(broken).toEqual([]);
  });

  it("catches a link to a missing page and to a missing heading (negative controls)", () => {
    const pages: Record<string, string> = { "docs/a.md": "# A\n\n## The fence: admission (C3)\n", "README.md": "" };
    const exists = (p: string) => p in pages;
    const read = (p: string) => pages[p]!;
    expect(brokenLinks("README.md", "[a](docs/a.md#the-fence-admission-c3)", exists, read)).toEqual([]);
    expect(brokenLinks("README.md", "[gone](docs/b.md)", exists, read)).toEqual(["docs/b.md (no such file)"]);
    expect(brokenLinks("README.md", "[x](docs/a.md#renamed)", exists, read)).toEqual(["docs/a.md#renamed (no such heading)"]);
  });
});
