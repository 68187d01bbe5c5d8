/**
 * A real single-member etcd as a child process we control (Debian's etcd 3.4 at /usr/bin/etcd,
 * or ETCD_BIN). Tests and drills need to stop, SIGKILL and restart the backend of the lock
 * service while keeping its data (revisions, leases), which an external etcd would not allow.
 *
 * Client and peer ports are picked free on 127.0.0.1; `restart()` keeps both ports and the data
 * directory, so clients configured with `endpoint` reconnect to the same address.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";

/** Path of the etcd binary (ETCD_BIN overrides), or undefined when none is installed. */
export function etcdBinary(): string | undefined {
  const candidates = [process.env.ETCD_BIN, "/usr/bin/etcd", "/usr/local/bin/etcd"].filter((p): p is string => !!p);
  for (const p of candidates) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // try the next one
    }
  }
  return undefined;
}

export interface EtcdOptions {
  /** Receives etcd's own log lines (it logs to stderr). */
  log?: (line: string) => void;
}

export class EtcdServer {
  private child: ChildProcess | undefined;

  private constructor(
    readonly dataDir: string,
    readonly clientPort: number,
    readonly peerPort: number,
    private readonly opts: EtcdOptions,
  ) {}

  /** Starts etcd in a fresh temp data dir; resolves when it answers on its client port. */
  static async start(opts: EtcdOptions = {}): Promise<EtcdServer> {
    if (!etcdBinary()) throw new Error("no etcd binary found (install etcd-server or set ETCD_BIN)");
    const dataDir = mkdtempSync(join(tmpdir(), "railfence-etcd-"));
    const server = new EtcdServer(dataDir, await freePort(), await freePort(), opts);
    await server.startProcess();
    return server;
  }

  /** The client URL (for ETCD_ENDPOINTS). */
  get endpoint(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  private async startProcess(): Promise<void> {
    const client = this.endpoint;
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const args = [
      "--name", "railfence",
      "--data-dir", join(this.dataDir, "member-data"),
      "--listen-client-urls", client,
      "--advertise-client-urls", client,
      "--listen-peer-urls", peer,
      "--initial-advertise-peer-urls", peer,
      "--initial-cluster", `railfence=${peer}`,
      "--initial-cluster-state", "new",
      // A shorter heartbeat lowers etcd's minimum lease TTL (1.5 x election ticks) to ~1 s,
      // so expiry tests do not wait for the default 2 s floor.
      "--heartbeat-interval", "50",
      "--election-timeout", "500",
      "--logger", "zap",
      "--log-level", "warn",
    ];
    const child = spawn(etcdBinary()!, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    const log = this.opts.log;
    child.stdout?.on("data", (d: Buffer) => log?.(d.toString()));
    child.stderr?.on("data", (d: Buffer) => log?.(d.toString()));
    await this.waitReady(child);
  }

  /** Ready = /health says the member has a leader and serves requests. */
  private async waitReady(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`etcd exited (code ${child.exitCode}) during start-up`);
      if (await this.healthy()) return;
      if (Date.now() > deadline) throw new Error("etcd did not become ready within 30 s");
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private async healthy(): Promise<boolean> {
    if (!(await portOpen(this.clientPort))) return false;
    try {
      const res = await fetch(`${this.endpoint}/health`, { signal: AbortSignal.timeout(1000) });
      const body = (await res.json()) as { health?: string };
      return res.ok && body.health === "true";
    } catch {
      return false;
    }
  }

  /** Graceful stop (SIGTERM, SIGKILL after 10 s). Data is kept. */
  async stop(): Promise<void> {
    await this.signalAndWait("SIGTERM");
  }

  /** Crash-like stop (SIGKILL). Data is kept (etcd's WAL makes it durable). */
  async kill(): Promise<void> {
    await this.signalAndWait("SIGKILL");
  }

  /** SIGSTOP / SIGCONT: the port stays open but nothing answers (a hung backend). */
  pause(): void {
    this.child?.kill("SIGSTOP");
  }

  resume(): void {
    this.child?.kill("SIGCONT");
  }

  /** Stops (if running) and starts again on the same ports with the same data. */
  async restart(): Promise<void> {
    await this.stop();
    await this.startProcess();
  }

  /** Kills etcd and removes its data directory. */
  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  private async signalAndWait(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGCONT");
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
    this.child = undefined;
  }
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.setTimeout(500);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(false));
  });
}
