/**
 * A real three-member etcd cluster as child processes we control (the same binary as
 * etcd.ts). The single-member EtcdServer cannot lose quorum or elect a new leader; this one
 * can: drills SIGKILL the leader and restart it on its data dir, SIGSTOP a member (a hung or
 * isolated peer), and stop two members at once so the survivor has no quorum.
 *
 * Every member listens on loopback client and peer ports picked free. The leader is found by
 * asking each answering member for its status (the v3 JSON gateway's maintenance/status), so the
 * harness never guesses. `destroy()` stops every member by its own pid and removes the data.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { etcdBinary } from "./etcd.js";
import { freePort } from "./ports.js";

export interface EtcdClusterOptions {
  /** Members (3 unless told; an odd number, so a majority is well defined). */
  size?: number;
  /** Receives every member's log lines, prefixed by its name. */
  log?: (line: string) => void;
  /** Where ports come from (freePort unless told): a test hands out a taken one to see the retry. */
  port?: () => Promise<number>;
}

/** A member's process ended while the cluster waited for it to be healthy. */
export class EtcdMemberExited extends Error {
  constructor(readonly member: string) {
    super(`${member} exited`);
  }
}

/**
 * Heartbeat and election timeout (ms). Slower than the single member's 50/500: on two busy
 * cores a 500 ms election timeout lets a starved leader be deposed without any fault injected,
 * and the drill wants the elections it causes, not noise. etcd's minimum lease TTL becomes
 * 1.5 x 10 ticks x 100 ms = 1.5 s (rounded up to 2 s): executors' leases are longer.
 */
const HEARTBEAT_MS = 100;
const ELECTION_MS = 1000;

export class EtcdMember {
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  /** etcd's member id (decimal string), learnt from its first status answer; stable across restarts. */
  memberId: string | undefined;
  paused = false;

  constructor(
    readonly name: string,
    readonly dataDir: string,
    readonly clientPort: number,
    readonly peerPort: number,
    private readonly log?: (line: string) => void,
  ) {}

  get endpoint(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  get peerUrl(): string {
    return `http://127.0.0.1:${this.peerPort}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process (on its data dir: a restart rejoins with what it had). */
  spawn(initialCluster: string, extraArgs: string[] = []): void {
    if (this.running) throw new Error(`${this.name} is already running`);
    const args = [
      ["--name", this.name],
      ["--data-dir", this.dataDir],
      ["--listen-client-urls", this.endpoint],
      ["--advertise-client-urls", this.endpoint],
      ["--listen-peer-urls", this.peerUrl],
      ["--initial-advertise-peer-urls", this.peerUrl],
      // Read only on the first start: a member with a data dir rejoins from its WAL.
      ["--initial-cluster", initialCluster],
      ["--initial-cluster-state", "new"],
      ["--initial-cluster-token", "railfence-drill"],
      ["--heartbeat-interval", String(HEARTBEAT_MS)],
      ["--election-timeout", String(ELECTION_MS)],
      ["--logger", "zap"],
      ["--log-level", "warn"],
      extraArgs,
    ].flat();
    const child = spawn(etcdBinary()!, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    this.paused = false;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    const log = this.log;
    const forward = (d: Buffer) => {
      for (const line of d.toString().split("\n")) if (line) log?.(`[${this.name}] ${line}`);
    };
    child.stdout?.on("data", forward);
    child.stderr?.on("data", forward);
  }

  /** Sends signal and, for a terminating one, waits for the exit (a stopped process is continued first). */
  async signal(signal: "SIGKILL" | "SIGTERM"): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    if (this.paused) child.kill("SIGCONT");
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await this.exited;
    clearTimeout(timer);
    this.paused = false;
  }

  /** SIGSTOP: its ports stay open, nothing answers, its peers stop hearing from it. */
  pause(): void {
    if (!this.running) throw new Error(`${this.name} is not running`);
    this.child!.kill("SIGSTOP");
    this.paused = true;
  }

  resume(): void {
    if (!this.running) return;
    this.child!.kill("SIGCONT");
    this.paused = false;
  }

  /** This member's view: its own id and the leader it knows (undefined if it does not answer). */
  async status(timeoutMs = 1000): Promise<{ memberId: string; leaderId: string; raftTerm: number } | undefined> {
    if (!this.running || this.paused) return undefined;
    try {
      const res = await fetch(`${this.endpoint}/v3/maintenance/status`, { method: "POST", body: "{}", signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok) return undefined;
      const body = (await res.json()) as { header?: { member_id?: string; raft_term?: string }; leader?: string };
      if (!body.header?.member_id) return undefined;
      this.memberId = body.header.member_id;
      return { memberId: body.header.member_id, leaderId: body.leader ?? "0", raftTerm: Number(body.header.raft_term ?? 0) };
    } catch {
      return undefined;
    }
  }

  /** /health is true only when the member has a leader and a quorum commits (etcd 3.4). */
  async healthy(timeoutMs = 1000): Promise<boolean> {
    if (!this.running || this.paused) return false;
    try {
      const res = await fetch(`${this.endpoint}/health`, { signal: AbortSignal.timeout(timeoutMs) });
      const body = (await res.json()) as { health?: string };
      return res.ok && body.health === "true";
    } catch {
      return false;
    }
  }
}

export class EtcdCluster {
  private readonly forks: EtcdMember[] = [];

  private constructor(
    readonly root: string,
    readonly members: EtcdMember[],
  ) {}

  /**
   * Starts every member in a fresh temp dir; resolves once all are healthy under one leader.
   * A port picked free can be taken before etcd binds it (the kernel hands the same ephemeral
   * range to other processes' outgoing connections, and a drill's mesh makes many): a member that
   * exits while the cluster starts is taken for that, and the whole cluster starts again on fresh
   * ports and a fresh dir, up to three times. Nothing has used the cluster yet, so nothing is lost.
   */
  static async start(opts: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await EtcdCluster.startOnce(opts);
      } catch (err) {
        if (!(err instanceof EtcdMemberExited) || attempt >= 3) throw err;
        opts.log?.(`[etcd-cluster] ${err.message} while starting (a port taken before it bound?): starting again on fresh ports`);
      }
    }
  }

  private static async startOnce(opts: EtcdClusterOptions): Promise<EtcdCluster> {
    if (!etcdBinary()) throw new Error("no etcd binary found (install etcd-server or set ETCD_BIN)");
    const size = opts.size ?? 3;
    const port = opts.port ?? freePort;
    const root = mkdtempSync(join(tmpdir(), "railfence-etcd-cluster-"));
    const members: EtcdMember[] = [];
    for (let i = 1; i <= size; i++) members.push(new EtcdMember(`etcd-${i}`, join(root, `etcd-${i}`), await port(), await port(), opts.log));
    const cluster = new EtcdCluster(root, members);
    try {
      for (const m of members) m.spawn(cluster.initialCluster);
      await cluster.waitHealthy(60_000);
    } catch (err) {
      await cluster.destroy();
      throw err;
    }
    return cluster;
  }

  get initialCluster(): string {
    return this.members.map((m) => `${m.name}=${m.peerUrl}`).join(",");
  }

  /** Every member's client URL, comma-separated: the lock service's ETCD_ENDPOINTS. */
  get endpoints(): string {
    return this.members.map((m) => m.endpoint).join(",");
  }

  /** The member every answering member names as leader, when they agree; undefined otherwise. */
  async leader(): Promise<EtcdMember | undefined> {
    const views = (await Promise.all(this.members.map((m) => m.status()))).filter((v) => v !== undefined);
    const named = new Set(views.map((v) => v.leaderId));
    if (views.length === 0 || named.size !== 1) return undefined;
    const [id] = named;
    return this.members.find((m) => m.memberId === id && m.running && !m.paused);
  }

  /** Waits for a leader (optionally not `other`, the one just removed); returns it and how long it took. */
  async waitLeader(timeoutMs: number, not?: EtcdMember): Promise<{ leader: EtcdMember; ms: number }> {
    const started = Date.now();
    for (;;) {
      const leader = await this.leader();
      if (leader && leader !== not) return { leader, ms: Date.now() - started };
      if (Date.now() - started > timeoutMs) throw new Error(`no etcd leader within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Waits until every running, unpaused member is healthy (has a leader, commits). */
  async waitHealthy(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (const m of this.members) if (!m.running) throw new EtcdMemberExited(m.name);
      const live = this.members.filter((m) => !m.paused);
      if ((await Promise.all(live.map((m) => m.healthy()))).every(Boolean) && (await this.leader())) return;
      if (Date.now() > deadline) throw new Error(`etcd cluster not healthy within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** SIGKILL (a crash): the WAL on its data dir keeps what it acknowledged. */
  async kill(m: EtcdMember): Promise<void> {
    await m.signal("SIGKILL");
  }

  /** Starts a stopped member again on its ports and data dir (it rejoins; health is the caller's wait). */
  restart(m: EtcdMember): void {
    m.spawn(this.initialCluster);
  }

  /**
   * Negative control only: a copy of a stopped member's data started alone with
   * --force-new-cluster, on ports of its own. This is the split an operator makes by "recovering"
   * a minority member: the copy has the cluster's history up to the copy and commits alone from
   * there, so its revisions (the lock's tokens) repeat the ones the real cluster issues later.
   * Resolves once it is healthy; `destroy()` stops it with the members.
   */
  async forkAlone(m: EtcdMember, log?: (line: string) => void): Promise<EtcdMember> {
    if (m.running) throw new Error(`${m.name} must be stopped before its data is copied`);
    const fork = new EtcdMember(`${m.name}-fork`, join(this.root, `${m.name}-fork`), await freePort(), await freePort(), log);
    cpSync(m.dataDir, fork.dataDir, { recursive: true });
    // With a data dir the member keeps its id from the WAL; --initial-cluster is not read again.
    fork.spawn(`${fork.name}=${fork.peerUrl}`, ["--force-new-cluster"]);
    this.forks.push(fork);
    const deadline = Date.now() + 30_000;
    while (!(await fork.healthy())) {
      if (!fork.running) throw new Error(`${fork.name} exited`);
      if (Date.now() > deadline) throw new Error(`${fork.name} not healthy within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return fork;
  }

  /**
   * Polls every member's status until stopped: each change of the leader the members agree on
   * (an election seen from outside), and the highest raft term seen (terms also count elections
   * that found no majority).
   */
  watchLeaders(intervalMs = 200): { stop(): Promise<{ changes: string[]; firstTerm: number; lastTerm: number }> } {
    let stopped = false;
    const changes: string[] = [];
    let current: string | undefined;
    let firstTerm = 0;
    let lastTerm = 0;
    const loop = (async () => {
      while (!stopped) {
        const views = (await Promise.all(this.members.map((m) => m.status(intervalMs)))).filter((v) => v !== undefined);
        for (const v of views) {
          if (firstTerm === 0) firstTerm = v.raftTerm;
          lastTerm = Math.max(lastTerm, v.raftTerm);
        }
        const leader = await this.leader();
        if (leader && leader.name !== current) {
          current = leader.name;
          changes.push(leader.name);
        }
        await new Promise((r) => setTimeout(r, intervalMs));
      }
    })();
    return {
      async stop() {
        stopped = true;
        await loop;
        return { changes, firstTerm, lastTerm };
      },
    };
  }

  /** Stops every member (and fork) by its pid and removes the data. */
  async destroy(): Promise<void> {
    for (const m of [...this.members, ...this.forks]) await m.signal("SIGKILL").catch(() => {});
    rmSync(this.root, { recursive: true, force: true });
  }
}
