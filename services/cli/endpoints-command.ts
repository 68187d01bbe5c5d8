/**
 * `railfence endpoints`: what the CLI resolved and where each value came from. The first
 * thing to run when a command talks to the wrong place. Database passwords are masked.
 */
import type { CommandSpec } from "./command.js";
import { redactUrl, type Endpoint, type ResolvedEndpoints } from "./endpoints.js";
import { EXIT_OK } from "./exit-codes.js";
import { formatTable, printJson } from "./output.js";

/** Endpoints as one JSON-ready object (paydb password masked). */
export function endpointsJson(e: ResolvedEndpoints): Record<string, unknown> {
  const entry = <T>(x: Endpoint<T> | undefined, map: (v: T) => unknown = (v) => v) => (x ? { url: map(x.value), source: x.source } : null);
  return {
    payouts: entry(e.payouts),
    railProxy: entry(e.railProxy),
    lock: entry(e.lock),
    paydb: entry(e.paydb, redactUrl),
    paydbAudit: entry(e.paydbAudit, redactUrl),
    rail: entry(e.rail),
    railControl: entry(e.railControl),
    metrics: entry(e.metrics),
    file: e.file,
  };
}

export function endpointsTable(e: ResolvedEndpoints): string {
  const rows: string[][] = [];
  const add = (name: string, x: Endpoint<string> | undefined) => rows.push([name, x?.value ?? "(not set)", x?.source ?? ""]);
  add("payouts", e.payouts);
  (e.railProxy?.value ?? []).forEach((u, i) => rows.push([i === 0 ? "rail-proxy" : "", u, e.railProxy!.source]));
  add("lock", e.lock);
  add("paydb", e.paydb && { ...e.paydb, value: redactUrl(e.paydb.value) });
  add("paydb (audit)", e.paydbAudit && { ...e.paydbAudit, value: redactUrl(e.paydbAudit.value) });
  if (e.rail) add("rail (info)", e.rail);
  if (e.railControl) add("rail-control (info)", e.railControl);
  for (const [name, url] of Object.entries(e.metrics?.value ?? {})) rows.push([`metrics ${name}`, url, "file"]);
  const file = `endpoints file: ${e.file.path} (${e.file.found ? "found" : "not found"})`;
  return `${formatTable(["ENDPOINT", "URL", "SOURCE"], rows)}\n\n${file}\nprecedence: flag > env > file > default`;
}

const endpoints: CommandSpec = {
  words: ["endpoints"],
  usage: "endpoints",
  summary: "show the endpoints the CLI resolved, and where each came from",
  options: [],
  positionals: 0,
  async run(ctx) {
    if (ctx.json) printJson(ctx.output, endpointsJson(ctx.endpoints));
    else ctx.output.out(endpointsTable(ctx.endpoints));
    return EXIT_OK;
  },
};

export const endpointCommands: readonly CommandSpec[] = [endpoints];
