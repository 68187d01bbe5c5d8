/**
 * The model <-> code table (model/README.md) must say what the code does: every mapped range
 * keeps its fingerprint, and the checker catches a range that moved or changed.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error plain ES module script, no types
import { check, parseRows } from "../../model/check-map.mjs";

type Row = { id: string; file: string; lines: string };
type Result = { problems: string[]; pending: string[]; updated: string[] };
const run = check as (o?: object) => Result;

const repo = join(import.meta.dirname, "..", "..");
const temps: string[] = [];
afterEach(() => {
  for (const t of temps.splice(0)) rmSync(t, { recursive: true, force: true });
});

/** A copy of the model folder and of one mapped file, to break on purpose. */
function copyWith(row: Row) {
  const root = mkdtempSync(join(tmpdir(), "model-map-"));
  temps.push(root);
  cpSync(join(repo, "model"), join(root, "model"), { recursive: true });
  cpSync(join(repo, row.file), join(root, row.file), { recursive: true });
  return { root, readmePath: join(root, "model", "README.md"), modelPath: join(root, "model", "railfence.pml") };
}

const rows = (): Row[] => parseRows(readFileSync(join(repo, "model", "README.md"), "utf8"));
const mapped = () => rows().find((r) => r.id === "admit-sql")!;
/** Problems about rows of the one file the copy holds (the others are absent on purpose). */
const about = (res: Result, file: string) => res.problems.filter((p) => p.includes(file) && !p.includes("no longer exists"));

describe("model <-> code map", () => {
  it("every mapped range still has its recorded fingerprint, and every model step exists", () => {
    const res = run();
    expect(res.problems).toEqual([]);
    expect(rows().length - res.pending.length).toBeGreaterThan(20);
  });

  it("when a mapped statement moves, it says where to, and --repoint moves the row", () => {
    const row = mapped();
    const dirs = copyWith(row);
    const path = join(dirs.root, row.file);
    writeFileSync(path, `// a new first line\n// and a second\n${readFileSync(path, "utf8")}`);
    const [from, to] = row.lines.split("-").map(Number) as [number, number];
    const moved = run({ dirs });
    expect(moved.problems.some((p) => p.startsWith(`${row.id}: ${row.file}:${row.lines} moved to ${row.file}:${from + 2}-${to + 2}`))).toBe(true);
    expect(run({ dirs, repoint: true }).updated).toContain(row.id);
    expect(about(run({ dirs }), row.file)).toEqual([]);
  });

  it("when a mapped statement changes, it fails with the new text until someone accepts it", () => {
    const row = mapped();
    const dirs = copyWith(row);
    const path = join(dirs.root, row.file);
    const [from] = row.lines.split("-").map(Number) as [number];
    const lines = readFileSync(path, "utf8").split("\n");
    lines[from] = lines[from]!.replace("h.mark < EXCLUDED.mark", "h.mark <= EXCLUDED.mark");
    lines[from + 2] = lines[from + 2]!.replace("h.mark < EXCLUDED.mark", "h.mark <= EXCLUDED.mark");
    writeFileSync(path, lines.join("\n"));
    const changed = run({ dirs });
    const problem = changed.problems.find((p) => p.startsWith(`${row.id}:`));
    expect(problem).toMatch(/changed \(fingerprint [0-9a-f]{12} -> [0-9a-f]{12}\)/);
    expect(problem).toContain("h.mark <= EXCLUDED.mark");
    expect(about(changed, row.file).map((p) => p.split(":")[0])).toEqual([row.id]);
    expect(run({ dirs, accept: [row.id] }).updated).toEqual([row.id]);
    expect(about(run({ dirs }), row.file)).toEqual([]);
  });

  it("when a model step disappears, the rows that name it fail", () => {
    const row = mapped();
    const dirs = copyWith(row);
    writeFileSync(dirs.modelPath, readFileSync(dirs.modelPath, "utf8").replaceAll("[M:admission]", ""));
    expect(run({ dirs }).problems.some((p) => p.includes("[M:admission] is no longer in model/railfence.pml"))).toBe(true);
  });
});
