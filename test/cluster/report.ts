/**
 * The cluster run's report: one row per step (time, verdict, what was observed), then the
 * sections the drills fill in. Printed at the end and written to reports/cluster/.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface StepRow {
  name: string;
  seconds: number;
  ok: boolean;
  detail: string;
}

export class Report {
  readonly steps: StepRow[] = [];
  readonly sections: Array<{ title: string; body: string }> = [];
  readonly started = new Date();
  failed = false;

  constructor(private readonly log: (line: string) => void) {}

  /** Runs one step, timing it; a throwing step is recorded as failed and rethrown. */
  async step<T>(name: string, fn: () => Promise<T> | T, detail?: (v: T) => string): Promise<T> {
    const t0 = Date.now();
    this.log(`== ${name}`);
    try {
      const v = await fn();
      const row = { name, seconds: (Date.now() - t0) / 1000, ok: true, detail: detail ? detail(v) : "" };
      this.steps.push(row);
      this.log(`   ok in ${row.seconds.toFixed(1)} s ${row.detail}`);
      return v;
    } catch (err) {
      const row = { name, seconds: (Date.now() - t0) / 1000, ok: false, detail: (err as Error).message.split("\n")[0]!.slice(0, 300) };
      this.steps.push(row);
      this.failed = true;
      this.log(`   FAILED in ${row.seconds.toFixed(1)} s: ${(err as Error).message}`);
      throw err;
    }
  }

  section(title: string, body: string): void {
    this.sections.push({ title, body });
  }

  markdown(): string {
    const total = (Date.now() - this.started.getTime()) / 1000;
    const lines = [
      `# Cluster test: ${this.failed ? "FAILED" : "PASSED"}`,
      "",
      `Started ${this.started.toISOString()}, ${total.toFixed(0)} s in all.`,
      "",
      "| step | result | time | observed |",
      "|---|---|---|---|",
      ...this.steps.map((s) => `| ${s.name} | ${s.ok ? "ok" : "**FAILED**"} | ${s.seconds.toFixed(1)} s | ${s.detail.replace(/\|/g, "\\|")} |`),
    ];
    for (const s of this.sections) lines.push("", `## ${s.title}`, "", s.body);
    return `${lines.join("\n")}\n`;
  }

  write(dir: string): string {
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `cluster-${this.started.toISOString().replace(/[:.]/g, "-")}.md`);
    writeFileSync(file, this.markdown());
    return file;
  }
}
