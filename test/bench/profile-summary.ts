/**
 * Where a process's CPU went, by package: reads the V8 CPU profiles `node --cpu-prof` wrote and
 * adds up each sample's self time under the package its function came from (node_modules/<pkg>,
 * railfence's own code, Node's internals, the garbage collector). `npm run bench --
 * --proxy-node-args "--cpu-prof --cpu-prof-dir=DIR"` writes the proxies' profiles; the bench then
 * prints this table for them.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The bucket a function belongs to. */
export function packageOf(frame: ProfileNode["callFrame"]): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === "(garbage collector)") return "(gc)";
    if (functionName === "(idle)" || functionName === "(program)") return functionName;
    return "(native)";
  }
  const nm = url.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const parts = url.slice(nm + "/node_modules/".length).split("/");
    return parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  if (url.includes("/services/") || url.includes("/tools/")) return "railfence";
  return "(other)";
}

/** Self time (µs) per package over every profile in dir, largest first, idle left out. */
export function summarizeProfiles(dir: string): Array<{ pkg: string; us: number; share: number }> {
  const totals = new Map<string, number>();
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".cpuprofile"))) {
    const p = JSON.parse(readFileSync(join(dir, f), "utf8")) as CpuProfile;
    const bucket = new Map(p.nodes.map((n) => [n.id, packageOf(n.callFrame)]));
    p.samples.forEach((id, i) => {
      const pkg = bucket.get(id) ?? "(other)";
      totals.set(pkg, (totals.get(pkg) ?? 0) + (p.timeDeltas[i] ?? 0));
    });
  }
  totals.delete("(idle)");
  const all = [...totals.values()].reduce((a, b) => a + b, 0) || 1;
  return [...totals.entries()].map(([pkg, us]) => ({ pkg, us, share: us / all })).sort((a, b) => b.us - a.us);
}

/** A markdown table of the summary (top rows). */
export function profileTable(rows: ReturnType<typeof summarizeProfiles>, top = 15): string {
  return [
    "| package | CPU share | self time ms |",
    "|---|---|---|",
    ...rows.slice(0, top).map((r) => `| ${r.pkg} | ${(r.share * 100).toFixed(1)}% | ${(r.us / 1000).toFixed(0)} |`),
  ].join("\n");
}

// `tsx test/bench/profile-summary.ts DIR`: the table for a folder of profiles.
if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(profileTable(summarizeProfiles(process.argv[2] ?? ".")));
}
