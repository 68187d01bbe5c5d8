/**
 * `node dist/services/harness/check.js` — the invariant checker as a command, for drills and
 * for a real cluster (after `deploy/drills/replica-kill.sh`). Env: PAYDB_URL, RAILDB_URL (and
 * optional PAYDB_PASSWORD_FILE, RAILDB_PASSWORD_FILE),
 * CHECK_QUIESCENT=true when the system has been drained. Prints the verdict table (and a JSON
 * line with --json); exits 1 on any violation.
 */
import { databaseUrl } from "../shared/config.js";
import { checkInvariants, formatTable } from "./invariants.js";

// Passwords come from files (PAYDB_PASSWORD_FILE / RAILDB_PASSWORD_FILE), never from the URL.
const withPassword = (url: string | undefined, file: string | undefined, what: string) => (url ? databaseUrl(url, file, what) : undefined);
const paydb = withPassword(process.env.PAYDB_URL, process.env.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE");
const raildb = withPassword(process.env.RAILDB_URL, process.env.RAILDB_PASSWORD_FILE, "RAILDB_PASSWORD_FILE");
if (!paydb || !raildb) {
  console.error("PAYDB_URL and RAILDB_URL are required");
  process.exit(2);
}
const result = await checkInvariants(paydb, raildb, { quiescent: process.env.CHECK_QUIESCENT === "true" });
console.log(formatTable(result));
for (const v of result.violations.slice(0, 50)) console.log(`  ${v.invariant}: ${v.detail}`);
if (result.violations.length > 50) console.log(`  ... and ${result.violations.length - 50} more`);
if (process.argv.includes("--json")) console.log(JSON.stringify({ verdict: result.violations.length ? "FAIL" : "PASS", violations: result.violations, counts: result.counts }));
process.exit(result.violations.length ? 1 : 0);
