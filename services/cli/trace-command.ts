/**
 * `railfence trace <payout_id> [--trace-file PATH]`: prints a payout's trace as an indented tree
 * with durations, from the JSON-lines span file that `npm start` writes when no OTLP endpoint
 * is configured (.railfence/traces.jsonl). With a collector (Jaeger, Tempo, ...) use its UI.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { payoutIdOf } from "../shared/domain/submission-ref.js";
import type { CommandSpec } from "./command.js";
import { EXIT_NOT_FOUND, EXIT_OK, UsageError } from "./exit-codes.js";
import { printJson } from "./output.js";

export interface SpanLine {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  service?: string;
  startMs: number;
  durationMs: number;
  status?: number;
  attributes?: Record<string, unknown>;
}

/** Spans of every trace that touched the payout (directly or through an attempt reference). */
export function spansOfPayout(spans: SpanLine[], payoutId: string): SpanLine[] {
  const traces = new Set(
    spans
      .filter((s) => typeof s.attributes?.["railfence.payout_id"] === "string" && payoutIdOf(s.attributes["railfence.payout_id"] as string) === payoutId)
      .map((s) => s.traceId),
  );
  return spans.filter((s) => traces.has(s.traceId));
}

const SHOWN = ["railfence.admission", "railfence.rail_outcome", "railfence.fencing_token", "railfence.error_reason", "rpc.grpc.status_code", "db.statement"];

/** The tree as text: one line per span, children indented under their parent, in start order. */
export function renderTree(spans: SpanLine[]): string {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, SpanLine[]>();
  const roots: SpanLine[] = [];
  for (const s of spans) {
    if (s.parentSpanId && ids.has(s.parentSpanId)) children.set(s.parentSpanId, [...(children.get(s.parentSpanId) ?? []), s]);
    else roots.push(s);
  }
  const lines: string[] = [];
  const t0 = Math.min(...spans.map((s) => s.startMs));
  const walk = (s: SpanLine, depth: number) => {
    const attrs = SHOWN.filter((k) => s.attributes?.[k] !== undefined)
      .map((k) => `${k.replace(/^railfence\./, "")}=${String(s.attributes![k]).slice(0, 60)}`)
      .join(" ");
    const offset = `+${(s.startMs - t0).toFixed(1)}ms`.padStart(11);
    lines.push(
      `${offset} ${"  ".repeat(depth)}${s.name} [${s.service ?? "?"}] ${s.durationMs.toFixed(2)} ms${s.status === 2 ? " ERROR" : ""}${attrs ? `  ${attrs}` : ""}`,
    );
    for (const c of (children.get(s.spanId) ?? []).sort((a, b) => a.startMs - b.startMs)) walk(c, depth + 1);
  };
  for (const r of roots.sort((a, b) => a.startMs - b.startMs)) walk(r, 0);
  return lines.join("\n");
}

const trace: CommandSpec = {
  words: ["trace"],
  usage: "trace <payout_id> [--trace-file PATH]",
  summary: "print a payout's trace (CreatePayout -> executor -> lock -> proxy -> rail) as a tree",
  details: ["--trace-file PATH   span file (default .railfence/traces.jsonl, written by npm start)"],
  options: ["trace-file"],
  positionals: 1,
  async run(ctx) {
    const payoutId = ctx.args[0]!;
    const file = ctx.opts.string("trace-file") ?? join(process.cwd(), ".railfence", "traces.jsonl");
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      throw new UsageError(`cannot read span file ${file}`, "start the system with npm start (it writes .railfence/traces.jsonl) or pass --trace-file");
    }
    const spans = text
      .split("\n")
      .filter((l) => l.trim())
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as SpanLine];
        } catch {
          return [];
        }
      });
    const mine = spansOfPayout(spans, payoutId);
    if (mine.length === 0) {
      ctx.output.err(`no spans for payout ${payoutId} in ${file}`);
      return EXIT_NOT_FOUND;
    }
    if (ctx.json) printJson(ctx.output, mine);
    else ctx.output.out(renderTree(mine));
    return EXIT_OK;
  },
};

export const traceCommands: readonly CommandSpec[] = [trace];
