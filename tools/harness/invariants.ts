/**
 * The drills' invariant check: `railfence check`'s audit (services/cli/audit), run as the
 * auditor role with the rail's statement read through a rail-proxy — the production path —
 * plus one thing only the harness can do: a cross-check of that statement against the stub's
 * own ledger (raildb), so a proxy that hid payments from its statement would be caught too.
 */
import pg from "pg";
import { runAudit, type AuditResult, type Violation } from "../../services/cli/audit/audit.js";
import { proxyStatement, type StatementSource } from "../../services/cli/audit/statement.js";
import type { LedgerRow } from "../../services/rail-stub/ledger-store.js";
import { RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { connectClient, type ClientTls } from "./clients.js";
import { serviceUrl } from "./database-roles.js";

export type { Violation };
export { formatTable, type AuditCounts as CheckCounts } from "../../services/cli/audit/audit.js";
export type CheckResult = AuditResult;

export interface CheckTarget {
  /** paydb (any URL on it: the audit logs in as the auditor role). */
  paydbUrl: string;
  /** The stub's ledger, for the cross-check. */
  raildbUrl: string;
  /** A rail-proxy to read the statement through, and what to present when calling it. */
  proxyUrl: string;
  tls?: ClientTls;
}

/** The stub's ledger as a statement (harness only: the cross-check). */
export function ledgerStatement(raildb: pg.Pool): StatementSource {
  return async function* pages(since) {
    let after = "0";
    for (;;) {
      const { rows } = await raildb.query<LedgerRow>(
        "SELECT * FROM payments WHERE sequence > $1 AND ($2::timestamptz IS NULL OR booked_at >= $2) ORDER BY sequence LIMIT 1000",
        [after, since ?? null],
      );
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.sequence;
      yield rows.map((r) => ({
        railReference: r.rail_reference,
        clientReference: r.client_reference,
        accountId: r.account_id,
        beneficiary: r.beneficiary,
        amountMinor: BigInt(r.amount_minor),
        currency: r.currency,
        status: r.status,
        bookedAt: r.booked_at,
        sequence: BigInt(r.sequence),
      }));
    }
  };
}

/** The check target of a harness mesh: its first running proxy, called as the auditor (the daily audit's identity). */
export function meshCheckTarget(mesh: {
  dbUrl(kind: "paydb" | "raildb"): string;
  proxies: Array<{ running: boolean; url: string }>;
  clientTls(id?: "auditor"): ClientTls | undefined;
}): CheckTarget {
  const proxy = mesh.proxies.find((p) => p.running);
  if (!proxy) throw new Error("the check reads the statement through a rail-proxy: none is running");
  return { paydbUrl: mesh.dbUrl("paydb"), raildbUrl: mesh.dbUrl("raildb"), proxyUrl: proxy.url, tls: mesh.clientTls("auditor") };
}

/** Runs the audit over the whole history; `quiescent` = the system was drained. */
export async function checkInvariants(target: CheckTarget, opts: { quiescent?: boolean } = {}): Promise<CheckResult> {
  const paydb = new pg.Pool({ connectionString: serviceUrl(target.paydbUrl, "auditor"), max: 1 });
  const raildb = new pg.Pool({ connectionString: target.raildbUrl, max: 1 });
  paydb.on("error", () => {});
  raildb.on("error", () => {});
  try {
    const proxy = connectClient(RailProxyService, target.proxyUrl, { tls: target.tls });
    const result = await runAudit(
      paydb,
      proxyStatement(() => proxy, { timeoutMs: 30_000 }),
      { quiescent: opts.quiescent },
    );
    // Cross-check: the statement the proxy served is the stub's whole ledger.
    let ledger = 0;
    for await (const page of ledgerStatement(raildb)(undefined, undefined)) ledger += page.length;
    if (ledger !== result.counts.railPayments) {
      const v: Violation = {
        invariant: "STATEMENT_COMPLETE",
        detail: `STATEMENT_COMPLETE: the statement through rail-proxy has ${result.counts.railPayments} payments, the rail's own ledger ${ledger}`,
        row: { statement: result.counts.railPayments, ledger },
      };
      result.violations.push(v);
      result.table.push({ invariant: v.invariant, violations: 1 });
    }
    return result;
  } finally {
    await paydb.end();
    await raildb.end();
  }
}
