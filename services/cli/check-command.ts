/**
 * `railfence check [--since T] [--until T] [--quiescent] [--max-rows N] [--json]`: the invariant
 * checker as an operator's audit (a daily CronJob in production, and what every drill runs).
 *
 * Read-only: paydb through the auditor's role (SELECT and temporary tables only; --paydb,
 * RAILFENCE_PAYDB_URL or the endpoints file, password via PAYDB_PASSWORD_FILE), and the rail's
 * statement through rail-proxy's GetRailStatement, so the audit never holds the rail credential.
 * Exit codes: 0 every invariant holds, 5 violations (named in the report), 2 usage, 3 unreachable,
 * 1 refused (the identity by rail-proxy, the login or a read by paydb).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { databaseUrl } from "../shared/process/config.js";
import { RailProxyService } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { formatTable, runAudit, type AuditResult } from "./audit/audit.js";
import { proxyStatement } from "./audit/statement.js";
import { CallFailed } from "./clients.js";
import type { CommandContext, CommandSpec } from "./command.js";
import { redactUrl } from "./endpoints.js";
import { EXIT_OK, EXIT_VIOLATIONS, UsageError } from "./exit-codes.js";
import { printJson } from "./output.js";

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** An instant: ISO-8601, "now", or a duration ago ("90m", "24h", "7d"). */
export function parseInstant(option: string, value: string, now = new Date()): Date {
  const text = value.trim();
  if (text === "now") return now;
  const rel = /^(\d{1,6})([smhd])$/.exec(text);
  if (rel) return new Date(now.getTime() - Number(rel[1]) * UNITS[rel[2]!]!);
  if (/^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text)) {
    const d = new Date(text);
    if (!Number.isNaN(d.getTime())) return d;
  }
  throw new UsageError(`--${option} must be an ISO-8601 instant, "now", or a duration ago like 24h, got "${value}"`);
}

/** A duration ("90m", "24h", "7d") in milliseconds. */
export function parseDuration(option: string, value: string): number {
  const m = /^(\d{1,6})([smhd])$/.exec(value.trim());
  if (!m || Number(m[1]) === 0) throw new UsageError(`--${option} must be a duration like 90m, 24h or 7d, got "${value}"`);
  return Number(m[1]) * UNITS[m[2]!]!;
}

/** The human report: the verdict table, then the violations with the rows involved. */
export function auditReport(r: AuditResult, limit = 50): string {
  const verdict = r.violations.length === 0 ? "PASS: every invariant holds" : `FAIL: ${r.table.reduce((n, t) => n + t.violations, 0)} violations`;
  const lines = [`window: ${r.window.since ?? "-inf"} .. ${r.window.until ?? "now"}`, formatTable(r), "", verdict];
  for (const v of r.violations.slice(0, limit)) lines.push(`  ${v.detail}`);
  if (r.violations.length > limit) lines.push(`  ... and ${r.violations.length - limit} more (--json has them all)`);
  const c = r.counts;
  lines.push(
    "",
    `read: ${c.railPayments} rail payments (${c.railAccepted} accepted), ${c.intents} intents, ${c.payouts} payouts ` +
      `(${c.payoutsPaid} paid, ${c.payoutsFailed} failed, ${c.payoutsUnknown} unknown, ${c.payoutsNeedsAttention} need attention, ${c.payoutsOpen} open), ` +
      `${c.ambiguousUnresolved} ambiguous unresolved`,
  );
  return lines.join("\n");
}

/** Network-level failures of the pg client (no server answered), and the SQLSTATEs of a server that cannot serve. */
const PG_UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "57P01", "57P02", "57P03"]);

/**
 * A failed audit as the exit codes say (docs/cli.md): the statement's rail-proxy refused or was
 * unreachable (its Connect code decides), paydb unreachable is 3, paydb refusing the auditor's
 * login or a read is 1 with PostgreSQL's reason. Never "internal": the operator's next step differs.
 */
export function auditFailure(err: unknown, proxyUrl: string, paydbUrl: string): unknown {
  if (err instanceof ConnectError) return new CallFailed(err, proxyUrl);
  const e = err as { code?: string; message?: string };
  if (typeof e?.code !== "string") return err;
  const unreachable = PG_UNREACHABLE.has(e.code) || e.code.startsWith("08") || /timeout|terminated/i.test(e.message ?? "");
  const what = unreachable ? "paydb unreachable" : `paydb refused the audit (SQLSTATE ${e.code})`;
  return new CallFailed(new ConnectError(`${what}: ${e.message ?? e.code}`, unreachable ? Code.Unavailable : Code.PermissionDenied), redactUrl(paydbUrl));
}

async function check(ctx: CommandContext): Promise<number> {
  const since = ctx.opts.string("since");
  const until = ctx.opts.string("until");
  const window = {
    since: since === undefined ? undefined : parseInstant("since", since),
    until: until === undefined ? undefined : parseInstant("until", until),
  };
  if (window.since && window.until && window.since >= window.until) throw new UsageError("--since must be before --until");
  const paydbUrl = ctx.endpoints.paydbAudit?.value;
  if (!paydbUrl)
    throw new UsageError(
      "check needs paydb: pass --paydb URL (the auditor's role), set RAILFENCE_PAYDB_AUDIT_URL or RAILFENCE_PAYDB_URL, or run where .railfence/endpoints.json exists",
    );
  const proxies = ctx.endpoints.railProxy?.value ?? [];
  if (proxies.length === 0) throw new UsageError("check needs a rail-proxy (--rail-proxy URL) to read the rail's statement");
  const pool = new pg.Pool({
    connectionString: databaseUrl(paydbUrl, ctx.env.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    max: 1,
    application_name: "railfence-check",
  });
  pool.on("error", () => {});
  try {
    const maxRows = ctx.opts.integer("max-rows", 1, 100_000) ?? 200;
    const maxOpenAge = ctx.opts.string("max-open-age");
    const result = await runAudit(
      pool,
      proxyStatement(() => ctx.connections.client(RailProxyService, proxies[0]!), { timeoutMs: 30_000 }),
      {
        ...window,
        quiescent: ctx.opts.flag("quiescent"),
        maxRows,
        ...(maxOpenAge === undefined ? {} : { maxOpenAgeMs: parseDuration("max-open-age", maxOpenAge) }),
      },
    ).catch((err: unknown) => {
      throw auditFailure(err, proxies[0]!, paydbUrl);
    });
    const ok = result.violations.length === 0;
    if (ctx.json) printJson(ctx.output, { verdict: ok ? "PASS" : "FAIL", ...result });
    else ctx.output.out(auditReport(result));
    return ok ? EXIT_OK : EXIT_VIOLATIONS;
  } finally {
    await pool.end();
  }
}

export const checkCommands: readonly CommandSpec[] = [
  {
    words: ["check"],
    usage: "check [--since T] [--until T] [--quiescent] [--max-rows N] [--max-open-age D]",
    summary: "audit paydb against the rail's statement: every invariant, every shape of double payment",
    details: [
      '--since T, --until T  the window: intents created in it, payouts created or changed in it (ISO-8601, "now", or 24h / 7d ago); default: everything',
      "--quiescent           the system was drained: work still in flight is a violation",
      "--max-rows N          rows reported per invariant (the counts are always complete; default 200)",
      "--max-open-age D      a payout open (PENDING, PROCESSING, UNKNOWN) longer than this is a violation (90m, 24h, 7d; default 24h)",
      "reads paydb as the auditor (--paydb, RAILFENCE_PAYDB_AUDIT_URL, RAILFENCE_PAYDB_URL or the endpoints file; PAYDB_PASSWORD_FILE) and the statement through rail-proxy",
      "exit 0: every invariant holds; 5: violations (named); 2: usage; 3: unreachable; 1: refused",
    ],
    options: ["since", "until", "quiescent", "max-rows", "max-open-age"],
    positionals: 0,
    run: check,
  },
];
