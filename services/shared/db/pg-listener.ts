/**
 * One LISTEN connection per process and channel, fanning notifications out to whoever subscribed.
 * It is its own connection, never a pool's: a pooled client is handed to other queries, and a
 * LISTEN on it would end (or leak) with them.
 *
 * A notification is a hint, never a guarantee: PostgreSQL delivers it on commit to the sessions
 * listening at that moment, so one sent while this connection is down is lost. Every user
 * therefore keeps a bounded poll, and the listener tells everybody when it loses the connection
 * and again when it has it back (something may have happened while it was deaf). It reconnects in
 * the background with capped, jittered exponential backoff, and reports each change of state once
 * (not every failed attempt), so an outage is logged once.
 */
import pg from "pg";

export interface PgListenerOptions {
  url: string;
  channel: string;
  /** pg_stat_activity's application_name: how an operator (or a test) finds this connection. */
  applicationName: string;
  /** Called once per change: true when LISTEN is in place, false when the connection is lost. */
  onStateChange?: (connected: boolean) => void;
  /** The first reconnect waits between this and twice this (default 500 ms)... */
  retryInitialMs?: number;
  /** ...each further one twice as long, up to between this and twice this (default 500 ms: no growth). */
  retryMaxMs?: number;
}

export class PgListener {
  private client: pg.Client | undefined;
  private readonly subscribers = new Map<string, Set<() => void>>();
  private readonly everyone = new Set<(senderPid?: number, payload?: string) => void>();
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private reported: boolean | undefined;

  constructor(private readonly opts: PgListenerOptions) {}

  /** Starts listening; never throws (a failed connection is retried in the background). */
  start(): void {
    void this.connect();
  }

  /** Whether LISTEN is in place now. */
  get connected(): boolean {
    return this.client !== undefined;
  }

  /** Registers fn for notifications whose payload is key; returns the unsubscribe function. */
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

  /**
   * Registers fn for every notification on the channel, whatever its payload; returns the
   * unsubscribe function. fn gets the pid of the session that sent it and the payload (the empty
   * string when there is none), or neither when the connection came back (anything may have
   * been sent meanwhile).
   */
  subscribeAll(fn: (senderPid?: number, payload?: string) => void): () => void {
    this.everyone.add(fn);
    return () => this.everyone.delete(fn);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) for (const fn of set) fn();
    for (const fn of this.everyone) fn();
  }

  private report(connected: boolean): void {
    if (this.reported === connected) return;
    this.reported = connected;
    this.opts.onStateChange?.(connected);
  }

  private retryDelayMs(): number {
    const initial = this.opts.retryInitialMs ?? 500;
    const max = Math.max(initial, this.opts.retryMaxMs ?? initial);
    const base = Math.min(max, initial * 2 ** Math.min(this.failures - 1, 30));
    return base + Math.random() * base;
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.opts.url, connectionTimeoutMillis: 2000, application_name: this.opts.applicationName });
    let failed = false;
    const fail = () => {
      if (failed) return;
      failed = true;
      if (this.client === client) this.client = undefined;
      this.failures++;
      if (!this.closed) this.report(false);
      client.end().catch(() => {});
      // Everybody re-checks: a notification may have been sent while we were deaf.
      this.wakeAll();
      if (!this.closed) {
        this.retryTimer = setTimeout(() => void this.connect(), this.retryDelayMs());
        this.retryTimer.unref();
      }
    };
    client.on("error", fail);
    client.on("end", fail);
    client.on("notification", (msg) => {
      if (msg.channel !== this.opts.channel) return;
      for (const fn of this.everyone) fn(msg.processId, msg.payload ?? "");
      if (msg.payload === undefined) return;
      const set = this.subscribers.get(msg.payload);
      if (set) for (const fn of set) fn();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${pg.escapeIdentifier(this.opts.channel)}`);
      if (this.closed) {
        await client.end();
        return;
      }
      this.client = client;
      this.failures = 0;
      this.report(true);
      // And again once listening: what was announced during the outage is found now, not at the next poll.
      this.wakeAll();
    } catch {
      fail();
    }
  }
}
