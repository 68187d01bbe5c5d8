/**
 * Counts every fuzz case that ran and what it was answered with, and writes the tally to
 * reports/fuzz/<suite>.json plus the merged reports/fuzz-summary.json. Files run in parallel
 * workers, so each writes only its own suite file and the merge is rebuilt from all of them
 * (written to a temp file and renamed, so a reader never sees half a file).
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { projectRoot } from "../../services/shared/process/project-root.js";

export interface PropertyTally {
  cases: number;
  outcomes: Record<string, number>;
}

export class FuzzTally {
  readonly properties: Record<string, PropertyTally> = {};

  constructor(readonly suite: string) {}

  /** Records one case of property with its outcome ("ok", a Connect code name, or a wire-level label). */
  record(property: string, outcome: string): void {
    const p = (this.properties[property] ??= { cases: 0, outcomes: {} });
    p.cases += 1;
    p.outcomes[outcome] = (p.outcomes[outcome] ?? 0) + 1;
  }

  /** Records a settled call: "ok" or the error's code name. */
  recordSettled(property: string, result: { ok: boolean; error?: unknown }): void {
    this.record(property, result.ok ? "ok" : result.error instanceof ConnectError ? Code[result.error.code] : "non_connect_error");
  }

  total(): number {
    return Object.values(this.properties).reduce((n, p) => n + p.cases, 0);
  }

  cases(property: string): number {
    return this.properties[property]?.cases ?? 0;
  }

  /** Writes this suite's file and rebuilds the merged summary; returns the merged total. */
  write(): number {
    const dir = join(projectRoot(), "reports", "fuzz");
    mkdirSync(dir, { recursive: true });
    const mine = { suite: this.suite, total_cases: this.total(), properties: this.properties, written_at: new Date().toISOString() };
    atomicWrite(join(dir, `${this.suite}.json`), mine);
    const suites: Record<string, unknown> = {};
    let total = 0;
    for (const f of readdirSync(dir).filter((n) => n.endsWith(".json"))) {
      try {
        const s = JSON.parse(readFileSync(join(dir, f), "utf8")) as { suite: string; total_cases: number };
        suites[s.suite] = s;
        total += s.total_cases;
      } catch {
        // a suite file being replaced right now: the next writer includes it
      }
    }
    // scale: the FUZZ_SCALE this tally ran at, so `npm run hostile` can size its next run from it.
    atomicWrite(join(projectRoot(), "reports", "fuzz-summary.json"), {
      total_cases: total,
      scale: Number(process.env.FUZZ_SCALE ?? 1) || 1,
      suites,
      written_at: new Date().toISOString(),
    });
    return total;
  }
}

function atomicWrite(path: string, value: unknown): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, path);
}
