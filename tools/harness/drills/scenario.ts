/** What every drill scenario takes and returns. */
import type { Violation } from "../invariants.js";
import type { LockBackend } from "./drill-mesh.js";
import type { Rng } from "./rng.js";

export interface DrillParams {
  lockBackend: LockBackend;
  seed: number;
  /** Payouts of background load (scenario-specific default when undefined). */
  payouts?: number;
  rng: Rng;
  log: (line: string) => void;
  /** Shared PostgreSQL admin URL (tests); the drill starts its own server otherwise. */
  postgresUrl?: string;
  /** Faults of the scenario's main kind (the paydb failover drill's primary kills); its default when undefined. */
  kills?: number;
}

export type Verdict = "PASS" | "FAIL" | "CORRUPTION_DETECTED";

export interface DrillResult {
  scenario: string;
  lockBackend: LockBackend;
  seed: number;
  verdict: Verdict;
  violations: Violation[];
  counts: Record<string, number>;
  /** Scenario-specific expectations that were not met (a drill can fail without a violation). */
  failures: string[];
  notes: string[];
  durationMs: number;
}

export interface Scenario {
  name: string;
  summary: string;
  /** true: the scenario removes a guard on purpose and must detect the corruption. */
  expectsCorruption?: boolean;
  /** The invariant whose violation proves the checker caught what the missing guard let through. */
  caughtBy?: string;
  /**
   * The bounded test suite runs the scenario on this lock backend only (what it tests does not
   * depend on the lock: the paydb failover and restore drills); `npm run drill` runs it on both.
   */
  suiteBackend?: LockBackend;
  /**
   * The lock backends the scenario means something on (every backend when undefined). `all`
   * skips it on the others and says so; naming it with another backend is a usage error.
   */
  backends?: LockBackend[];
  run(params: DrillParams): Promise<Omit<DrillResult, "scenario" | "lockBackend" | "seed" | "durationMs">>;
}

/** Whether the scenario runs on this lock backend. */
export function runsOn(s: Pick<Scenario, "backends">, backend: LockBackend): boolean {
  return !s.backends || s.backends.includes(backend);
}

/** Verdict for a guarded scenario: PASS only with no violation and every expectation met. */
export function guardedVerdict(violations: Violation[], failures: string[]): Verdict {
  return violations.length === 0 && failures.length === 0 ? "PASS" : "FAIL";
}
