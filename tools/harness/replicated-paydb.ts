/**
 * paydb as an HA deployment runs it: a primary, a streaming standby, and a stable address (a TCP
 * relay) in front of whichever is the primary. `failover()` is what an HA operator does when the
 * primary's machine dies: the primary is killed outright, the standby promoted, the address
 * repointed, and a new standby cloned from the new primary so the next failover has one.
 *
 * Replication is synchronous (`synchronous_standby_names` names the standby, synchronous_commit
 * on: a commit returns only once the standby has the WAL) or asynchronous (a commit returns at
 * once; the standby follows when it can). The standby streams through a relay of its own, so the
 * drill's aimed strike can cut the replication link alone before the kill (a partition between
 * the two database machines, or a standby that fell behind): with asynchronous replication the
 * primary keeps committing what the standby will never see; with synchronous replication the same
 * commits wait, and are never acknowledged. (Freezing the standby's WAL receiver is not enough: the
 * WAL waits in its socket buffer and arrives after the kill.)
 */
import pg from "pg";
import { PostgresServer } from "./postgres.js";
import { TcpRelay } from "./tcp-relay.js";

/** The standby's application_name; synchronous_standby_names names it in synchronous mode. */
const STANDBY_NAME = "paydb_standby";

export interface FailoverRecord {
  /** The old primary's last WAL position we saw before the kill, and what the standby had replayed. */
  primaryLsn: string | undefined;
  standbyReplayLsn: string | undefined;
  /** Bytes of WAL the promoted standby never received (0 when it had everything we saw). */
  walLostBytes: number;
  /** When the primary was killed (epoch ms). */
  killedAt: number;
  /** Kill -> promoted -> relay repointed -> a new standby attached. */
  promotedAfterMs: number;
  standbyAttachedAfterMs: number;
}

export class ReplicatedPaydb {
  readonly failovers: FailoverRecord[] = [];

  private constructor(
    readonly synchronous: boolean,
    public primary: PostgresServer,
    public standby: PostgresServer,
    readonly relay: TcpRelay,
    private readonly replication: TcpRelay,
    private readonly log: (line: string) => void,
  ) {}

  static async start(opts: { synchronous: boolean; log?: (line: string) => void }): Promise<ReplicatedPaydb> {
    const primary = await PostgresServer.start({
      settings: {
        synchronous_commit: "on",
        synchronous_standby_names: opts.synchronous ? STANDBY_NAME : "",
        wal_keep_size: "1GB",
        wal_sender_timeout: "5s",
        wal_receiver_status_interval: "1s",
      },
    });
    let standby: PostgresServer | undefined;
    let replication: TcpRelay | undefined;
    try {
      replication = await TcpRelay.start(primary.port);
      standby = await primary.cloneStandby(STANDBY_NAME, replication.port);
      const relay = await TcpRelay.start(primary.port);
      const db = new ReplicatedPaydb(opts.synchronous, primary, standby, relay, replication, opts.log ?? (() => {}));
      await db.waitStandbyStreaming();
      return db;
    } catch (err) {
      await replication?.stop();
      await standby?.destroy();
      await primary.destroy();
      throw err;
    }
  }

  /** Cuts the replication link (the standby is away) until `reconnectReplication()`. */
  cutReplication(): void {
    this.replication.repoint(undefined);
  }

  /** The standby may connect again (it retries on its own, every wal_retrieve_retry_interval). */
  reconnectReplication(): void {
    this.replication.repoint(this.primary.port);
  }

  /** The admin URL through the stable address (what every service and the drill use). */
  url(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.relay.port}/${database}`;
  }

  /** Waits until the standby streams from the primary (and, when synchronous, is the sync standby). */
  async waitStandbyStreaming(timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const rows = await query<{ state: string; sync_state: string }>(
        this.primary,
        "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1",
        [STANDBY_NAME],
      ).catch(() => []);
      const ok = rows.some((r) => r.state === "streaming" && (!this.synchronous || r.sync_state === "sync"));
      if (ok) return;
      if (Date.now() > until) throw new Error(`the standby did not start streaming within ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /**
   * The primary dies; the standby is promoted and the address repointed; a new standby is cloned.
   * `cutReplicationMs`: the replication link is cut that long before the kill (the aimed strike:
   * what the primary commits meanwhile reaches the standby only if commits wait for it).
   */
  async failover(opts: { cutReplicationMs: number; beforeKill?: () => Promise<void>; afterKill?: () => Promise<void> }): Promise<FailoverRecord> {
    if (opts.cutReplicationMs > 0) {
      this.replication.repoint(undefined);
      await sleep(opts.cutReplicationMs);
    }
    await opts.beforeKill?.();
    const primaryLsn = await query<{ lsn: string }>(this.primary, "SELECT pg_current_wal_insert_lsn()::text AS lsn")
      .then((r) => r[0]?.lsn)
      .catch(() => undefined);
    await this.primary.crash();
    const killedAt = Date.now();
    this.relay.repoint(undefined);
    this.replication.repoint(undefined);
    await opts.afterKill?.();
    // The receiver notices the primary is gone; what it had is all the standby will ever have.
    await sleep(200);
    const standbyReplayLsn = await query<{ lsn: string }>(this.standby, "SELECT pg_last_wal_receive_lsn()::text AS lsn")
      .then((r) => r[0]?.lsn)
      .catch(() => undefined);
    await this.standby.promote();
    const old = this.primary;
    this.primary = this.standby;
    this.relay.repoint(this.primary.port);
    const promotedAfterMs = Date.now() - killedAt;
    await old.destroy();
    this.replication.repoint(this.primary.port);
    this.standby = await this.primary.cloneStandby(STANDBY_NAME, this.replication.port);
    await this.waitStandbyStreaming();
    const record: FailoverRecord = {
      primaryLsn,
      standbyReplayLsn,
      walLostBytes: 0,
      killedAt,
      promotedAfterMs,
      standbyAttachedAfterMs: Date.now() - killedAt,
    };
    record.walLostBytes = record.primaryLsn && standbyReplayLsn ? Math.max(0, lsnBytes(record.primaryLsn) - lsnBytes(standbyReplayLsn)) : 0;
    this.failovers.push(record);
    this.log(
      `[paydb] failover ${this.failovers.length}: promoted in ${promotedAfterMs} ms, new standby in ${record.standbyAttachedAfterMs} ms; WAL not received ${record.walLostBytes} bytes`,
    );
    return record;
  }

  async stop(): Promise<void> {
    await this.relay.stop();
    await this.replication.stop();
    await this.standby.destroy();
    await this.primary.destroy();
  }
}

function lsnBytes(lsn: string): number {
  const [hi, lo] = lsn.split("/");
  return Number.parseInt(hi!, 16) * 2 ** 32 + Number.parseInt(lo!, 16);
}

async function query<T extends pg.QueryResultRow>(server: PostgresServer, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: server.url("postgres"), connectionTimeoutMillis: 2000 });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
