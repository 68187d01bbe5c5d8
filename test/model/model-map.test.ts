/**
 * The model <-> code table (model/README.md) must say what the code does: every row's code is
 * found by its tag, keeps its fingerprint, and the checker catches a table that lags its tags, a
 * tag that disappeared, and code that changed.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { check, parseRows, type Row } from "../../model/check-map.js";

const run = check;

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
const about = (res: { problems: string[] }, file: string) => res.problems.filter((p) => p.includes(file) && !p.includes("no longer exists"));

describe("model <-> code map", () => {
  it("every row's code is at its tag, with its recorded fingerprint, and every model step exists", () => {
    const res = run();
    expect(res.problems).toEqual([]);
    expect(res.used.length).toBeGreaterThan(40);
  });

  it("code inserted above a step moves nothing by hand: the check names the lag, --write follows the tag", () => {
    const row = mapped();
    const dirs = copyWith(row);
    const path = join(dirs.root, row.file);
    writeFileSync(path, `-- a new first line\n-- and a second\n${readFileSync(path, "utf8")}`);
    const [from, to] = row.lines.split("-").map(Number) as [number, number];
    const lagging = about(run({ dirs }), row.file).filter((p) => p.startsWith(`${row.id}:`));
    expect(lagging).toEqual([`${row.id}: the table says ${row.file}:${row.lines}, its tag is at ${row.file}:${from + 2}-${to + 2}: run npm run generate`]);
    expect(run({ dirs, write: true }).updated).toContain(row.id);
    expect(about(run({ dirs }), row.file)).toEqual([]);
  });

  it("a tag removed from the code is named (outside migrations, a row has no other way to its code)", () => {
    const row = rows().find((r) => r.id === "admit-call")!;
    const dirs = copyWith(row);
    const path = join(dirs.root, row.file);
    writeFileSync(path, readFileSync(path, "utf8").replace(`[rule:${row.id}]`, "").replace(`[/rule:${row.id}]`, ""));
    expect(run({ dirs }).problems.filter((p) => p.startsWith(`${row.id}:`))).toEqual([
      `${row.id}: no [rule:${row.id}] tag in the code (only an applied migration may be named by its lines)`,
    ]);
  });

  it("when a mapped statement changes, it fails with the new text until someone accepts it", () => {
    const row = mapped();
    const dirs = copyWith(row);
    const path = join(dirs.root, row.file);
    writeFileSync(path, readFileSync(path, "utf8").replaceAll("h.mark < EXCLUDED.mark", "h.mark <= EXCLUDED.mark"));
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
