/**
 * Counts every transaction a pool ends, by database and outcome, on the process's registry.
 * PostgreSQL's own count (pg_stat_database.xact_commit) has no per-application breakdown; this
 * counter is how a reader learns which process spends a server's commits (each one is a WAL flush
 * with synchronous_commit on, the cost the benchmark's "commits per payout" is about).
 *
 * It reads the transaction status PostgreSQL reports in every ReadyForQuery message rather than
 * parsing SQL: a statement run outside a transaction block ends one transaction on its own
 * (idle -> idle), a block ends when the status goes back to idle (COMMIT, ROLLBACK, or a COMMIT
 * of a failed block, which the server answers "ROLLBACK"). That is what xact_commit counts, for
 * pool.query, checked-out clients, prepared statements and multi-statement strings alike, at the
 * cost of three listeners per connection and no work per statement beyond them. A new
 * connection's start-up counts one commit, as it does in xact_commit.
 */
import type pg from "pg";
import { Counter, type Registry } from "prom-client";

/** The counter's name, for readers of an exposition (the benchmark scrapes it). */
export const DB_TRANSACTIONS_METRIC = "railfence_db_transactions_total";

/** ReadyForQuery's transaction status: idle, in a block, in a failed block. */
type TxStatus = "I" | "T" | "E";

/** pg's connection object: an EventEmitter of the protocol's backend messages, by message name. */
interface ProtocolEvents {
  on(event: "readyForQuery", listener: (msg: { status: TxStatus }) => void): unknown;
  on(event: "commandComplete", listener: (msg: { text: string }) => void): unknown;
  on(event: "errorMessage", listener: () => void): unknown;
}

/** The database a connection string names (the label value), lower case as PostgreSQL folds it. */
export function databaseOf(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.slice(1)).toLowerCase() || "unknown";
  } catch {
    return "unknown";
  }
}

/** Counts, on registry, every transaction that pool's connections end in database. */
export function countTransactions(pool: pg.Pool, registry: Registry, database: string): void {
  // One family per registry, shared by every pool of the process (payouts has two).
  const counter =
    (registry.getSingleMetric(DB_TRANSACTIONS_METRIC) as Counter<"database" | "outcome"> | undefined) ??
    new Counter({
      name: "railfence_db_transactions_total",
      help: "Transactions this process's database pools ended, by database and outcome (commit, rollback): one per statement run outside a transaction block, one per block, one per new connection (its start-up). The per-process share of pg_stat_database.xact_commit",
      labelNames: ["database", "outcome"] as const,
      registers: [registry],
    });
  const commits = counter.labels({ database, outcome: "commit" });
  const rollbacks = counter.labels({ database, outcome: "rollback" });
  pool.on("connect", (client) => {
    // A backend's start-up is a transaction of its own (it reads the catalogue), and xact_commit
    // counts it: so does this counter, or a pool that reconnects would look cheaper than it is.
    commits.inc();
    const connection = (client as unknown as { connection: ProtocolEvents }).connection;
    // The pool emits connect after the start-up ReadyForQuery: the connection is idle.
    let status: TxStatus = "I";
    let failed = false;
    let lastTag = "";
    connection.on("errorMessage", () => {
      failed = true;
    });
    connection.on("commandComplete", (msg) => {
      lastTag = msg.text;
    });
    connection.on("readyForQuery", (msg) => {
      // Idle again: a statement outside a block, or a whole block, has ended.
      if (msg.status === "I") {
        const committed = !failed && (status === "I" || lastTag === "COMMIT");
        (committed ? commits : rollbacks).inc();
      }
      status = msg.status;
      failed = false;
      lastTag = "";
    });
  });
}
