/**
 * paydb reads behind the backlog and reconciler-liveness gauges (decisions 060, 061): how many
 * payouts wait in each state that is not final, how old the oldest of them is, and when the
 * reconciler last finished a pass. Ages are computed by paydb (its clock, the one that stamped
 * created_at), never by this host.
 */
import type { Pool } from "../shared/db/pg.js";

/** The states a payout waits in: not final. PAID and FAILED are final (only a human reopens). */
export const BACKLOG_STATES = ["PENDING", "PROCESSING", "UNKNOWN", "NEEDS_ATTENTION"] as const;
export type BacklogState = (typeof BACKLOG_STATES)[number];

export interface BacklogSnapshot {
  /** Every backlog state, 0 / 0 when none waits in it. */
  states: Record<BacklogState, { count: number; oldestAgeSeconds: number }>;
  /** Unix seconds of the reconciler's last finished pass; 0 when none was ever recorded. */
  reconcilerLastPassSeconds: number;
}

export function createBacklogStore(pool: Pool) {
  return {
    async read(): Promise<BacklogSnapshot> {
      // One statement, one round trip: the GROUP BY reads payouts_backlog_idx (migration 018),
      // which holds only the waiting rows. Age since created_at: how long the client has waited.
      const { rows } = await pool.query<{ state: string | null; n: string; age: number | null; pass_at: number | null }>(
        `SELECT b.state, b.n::text AS n, b.age, NULL::float8 AS pass_at
           FROM (SELECT state, count(*) AS n, extract(epoch FROM now() - min(created_at))::float8 AS age
                   FROM payouts WHERE state IN ('PENDING', 'PROCESSING', 'UNKNOWN', 'NEEDS_ATTENTION')
                  GROUP BY state) b
         UNION ALL
         SELECT NULL, '0', NULL, extract(epoch FROM pass_at)::float8 FROM reconciler_last_pass`,
      );
      const states = Object.fromEntries(BACKLOG_STATES.map((s) => [s, { count: 0, oldestAgeSeconds: 0 }])) as BacklogSnapshot["states"];
      let reconcilerLastPassSeconds = 0;
      for (const r of rows) {
        if (r.state === null) reconcilerLastPassSeconds = r.pass_at ?? 0;
        else if (r.state in states) states[r.state as BacklogState] = { count: Number(r.n), oldestAgeSeconds: Math.max(0, r.age ?? 0) };
      }
      return { states, reconcilerLastPassSeconds };
    },
  };
}

export type BacklogStore = ReturnType<typeof createBacklogStore>;
