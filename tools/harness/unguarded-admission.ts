/**
 * The admission statement with switches, for the negative controls that remove a statement guard
 * (the mark, the payout binding, one-live; decision 064). Production's rail_admit has no switch;
 * this installs harness_rail_admit (sql/unguarded-admission.sql) into one of the harness's
 * throwaway paydbs, as the owner, before a proxy that needs it starts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import type { AdmissionStatement, StatementGuards } from "../../services/rail-proxy/submission-store.js";
import { intentArrays, intentValues } from "../../services/rail-proxy/submission-store.js";
import { projectRoot } from "../../services/shared/process/project-root.js";

const ADMIT =
  "SELECT outcome, detail, (extract(epoch FROM now()) * 1000)::float8 AS admitted_at_ms FROM harness_rail_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

const ADMIT_BATCH =
  "SELECT ord, outcome, detail, (extract(epoch FROM now()) * 1000)::float8 AS admitted_at_ms FROM harness_rail_admit_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

/** The statement a proxy with these guards admits through (harness_rail_admit must be installed). */
export function unguardedAdmission(applies: StatementGuards): AdmissionStatement {
  return {
    query: (i) => ({ name: "rf_admit_unguarded", text: ADMIT, values: [...intentValues(i), applies.mark, applies.binding, applies.oneLive] }),
    batchQuery: (items) => ({
      name: "rf_admit_batch_unguarded",
      text: ADMIT_BATCH,
      values: [...intentArrays(items), applies.mark, applies.binding, applies.oneLive],
    }),
    applies,
  };
}

/** Installs harness_rail_admit into the paydb at ownerUrl (its owner: it alters the ledger). Idempotent. */
export async function installUnguardedAdmission(ownerUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: ownerUrl });
  await client.connect();
  try {
    await client.query("BEGIN");
    // Two proxies started at once must not both install it.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('harness_rail_admit'))");
    const { rows } = await client.query<{ installed: boolean }>("SELECT to_regproc('harness_rail_admit') IS NOT NULL AS installed");
    if (!rows[0]!.installed) await client.query(readFileSync(join(projectRoot(), "tools", "harness", "sql", "unguarded-admission.sql"), "utf8"));
    // The proxy's role may call it (PUBLIC may not).
    await client.query("REVOKE ALL ON FUNCTION harness_rail_admit, harness_rail_admit_batch FROM PUBLIC");
    await client.query("GRANT EXECUTE ON FUNCTION harness_rail_admit, harness_rail_admit_batch TO railfence_rail_proxy");
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}
