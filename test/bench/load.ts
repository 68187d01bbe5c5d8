/** A seeded, bounded, closed-loop load generator and the statistics the benchmark reports. */
import { readdirSync, readFileSync } from "node:fs";

export interface PointResult {
  ops: number;
  errors: Record<string, number>;
  seconds: number;
  throughput: number;
  p50: number;
  p95: number;
  p99: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Runs `concurrency` workers, each calling op() in a loop, for `seconds` after a warm-up; every
 * call's latency (ms) is recorded. An op that throws is counted under its reason.
 */
export async function closedLoop(
  concurrency: number,
  seconds: number,
  warmupSeconds: number,
  op: (worker: number) => Promise<void>,
  reasonOf: (err: unknown) => string,
): Promise<PointResult> {
  const latencies: number[] = [];
  const errors: Record<string, number> = {};
  let measuring = false;
  let stop = false;
  const worker = async (w: number) => {
    while (!stop) {
      const t = performance.now();
      try {
        await op(w);
        if (measuring) latencies.push(performance.now() - t);
      } catch (err) {
        if (measuring) {
          const r = reasonOf(err);
          errors[r] = (errors[r] ?? 0) + 1;
        }
      }
    }
  };
  const workers = Array.from({ length: concurrency }, (_, i) => worker(i));
  await new Promise((r) => setTimeout(r, warmupSeconds * 1000));
  measuring = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  measuring = false;
  const elapsed = (performance.now() - started) / 1000;
  stop = true;
  await Promise.all(workers);
  latencies.sort((a, b) => a - b);
  return {
    ops: latencies.length,
    errors,
    seconds: elapsed,
    throughput: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
  };
}

const CLK_TCK = 100;

/** user+sys CPU seconds of a process so far (Linux /proc). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** Peak resident set size of a process so far, in MB. */
export function peakRssMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : 0;
}

/** user+sys CPU seconds of a PostgreSQL server so far: the postmaster and every process it forked. */
export function postgresCpuSeconds(postmasterPid: number): number {
  let total = cpuSeconds(postmasterPid);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === postmasterPid) total += cpuSeconds(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return total;
}
