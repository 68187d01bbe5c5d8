/**
 * One LISTEN connection per lock-service process, fanning release notifications out to the
 * acquires waiting on each key. If the connection drops it reconnects in the background; until
 * then waiters fall back on their bounded poll (see waiting.ts), so a lost notification costs
 * latency, never correctness.
 */
import pg from "pg";

export type ReleaseListener = (key: string) => void;

export class PgListener {
  private client: pg.Client | undefined;
  private readonly subscribers = new Map<string, Set<() => void>>();
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly channel: string,
    private readonly onStateChange: (connected: boolean) => void = () => {},
  ) {}

  /** Starts listening; never throws (a failed connection is retried in the background). */
  start(): void {
    void this.connect();
  }

  /** Registers fn for releases of key; returns the unsubscribe function. */
  subscribe(key: string, fn: () => void): () => void {
    let set = this.subscribers.get(key);
    if (!set) {
      set = new Set();
      this.subscribers.set(key, set);
    }
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.subscribers.delete(key);
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2000, application_name: "lock/listener" });
    let failed = false;
    const fail = () => {
      if (failed) return;
      failed = true;
      if (this.client === client) this.client = undefined;
      this.onStateChange(false);
      client.end().catch(() => {});
      // After a reconnect, wake everybody: a release may have happened while we were deaf.
      for (const set of this.subscribers.values()) for (const fn of set) fn();
      if (!this.closed) {
        this.retryTimer = setTimeout(() => void this.connect(), 500 + Math.random() * 500);
        this.retryTimer.unref();
      }
    };
    client.on("error", fail);
    client.on("end", fail);
    client.on("notification", (msg) => {
      if (msg.channel !== this.channel || msg.payload === undefined) return;
      const set = this.subscribers.get(msg.payload);
      if (set) for (const fn of set) fn();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      if (this.closed) {
        await client.end();
        return;
      }
      this.client = client;
      this.onStateChange(true);
    } catch {
      fail();
    }
  }
}
