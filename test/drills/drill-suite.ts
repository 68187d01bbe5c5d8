/**
 * Bounded versions of every C5 scenario, for `npm test`. The full-size drills are
 * `npm run drill -- all`. Each scenario must meet its expectation: PASS, or, for a negative
 * control, CORRUPTION_DETECTED with the invariant that proves the checker caught what the
 * missing guard let through.
 */
import { describe, expect, it, inject } from "vitest";
import { BOUNDED_SOAK, BOUNDED_SOAK_CONTROLS, SCENARIOS } from "../../tools/harness/drills/catalogue.js";
import type { LockBackend } from "../../tools/harness/drills/drill-mesh.js";
import { runScenario } from "../../tools/harness/drills/run.js";
import { runsOn } from "../../tools/harness/drills/scenario.js";

/** Small loads: enough to exercise each path, small enough for two cores. */
const BOUNDED_PAYOUTS: Record<string, number> = {
  "replica-kill": 120,
  "rail-ambiguity": 30,
  "paydb-outage": 40,
  "etcd-quorum": 40,
  "etcd-quorum-fork": 40,
};

/** Primary kills of the paydb failover drills (20 in the full drill). */
const BOUNDED_KILLS = 2;

export function drillSuite(lockBackend: LockBackend): void {
  describe(`C5 drills on the ${lockBackend} lock backend`, () => {
    for (const s of SCENARIOS.filter((x) => runsOn(x, lockBackend))) {
      if (s.suiteBackend && s.suiteBackend !== lockBackend) continue;
      const expected = s.expectsCorruption ? "CORRUPTION_DETECTED" : "PASS";
      it(`${s.name}: ${expected}`, async () => {
        const seed = 20261129;
        const r = await runScenario(s, {
          lockBackend,
          seed,
          payouts: BOUNDED_PAYOUTS[s.name] ?? 6,
          kills: BOUNDED_KILLS,
          postgresUrl: inject("pgUrl"),
          log: () => {},
        });
        const detail = JSON.stringify({ failures: r.failures, notes: r.notes, violations: r.violations.slice(0, 5) }, null, 1);
        expect(r.verdict, detail).toBe(expected);
        if (s.expectsCorruption) expect(r.violations.map((v) => v.invariant)).toContain(s.caughtBy);
      }, 180_000);
    }
    it("soak (bounded): every nemesis kind, reconciled, audited: PASS", async () => {
      const r = await runScenario(BOUNDED_SOAK, { lockBackend, seed: 20261201, postgresUrl: inject("pgUrl"), log: () => {} });
      expect(r.verdict, JSON.stringify({ failures: r.failures, violations: r.violations.slice(0, 5), notes: r.notes.slice(0, 3) }, null, 1)).toBe("PASS");
      expect(r.counts.nemesisEvents).toBeGreaterThanOrEqual(11);
    }, 600_000);
    // The soak's negative controls: the same schedule with one guard removed must end in that
    // guard's violation. The guards are rail-proxy's, so one lock backend is enough.
    if (lockBackend === "pg") {
      for (const control of BOUNDED_SOAK_CONTROLS) {
        it(`${control.name} (bounded): CORRUPTION_DETECTED by ${control.caughtBy}`, async () => {
          const r = await runScenario(control, { lockBackend, seed: 20261201, postgresUrl: inject("pgUrl"), log: () => {} });
          expect(r.verdict, JSON.stringify({ failures: r.failures, notes: r.notes.slice(0, 3) }, null, 1)).toBe("CORRUPTION_DETECTED");
          expect(r.violations.map((v) => v.invariant)).toContain(control.caughtBy);
        }, 600_000);
      }
    }
  });
}
