/**
 * The mesh supervisor shared by `npm start`, the tests and the drills: it starts the system
 * as real OS processes on 127.0.0.1 (PostgreSQL, rail-stub, N rail-proxy replicas, ...), and
 * exposes every process so a caller can kill, pause, restart or re-wire it.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { installFenceSigningKey, migrate, type DatabaseKind } from "../../services/shared/db/migrate.js";
import { statementGuardsFrom } from "./controls/rail-proxy.js";
import { controlsIn } from "./controls/variables.js";
import { installUnguardedAdmission } from "./unguarded-admission.js";
import { signingKeyFromFile } from "../../services/shared/process/token-signature.js";
import type { DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { connectClient, type ClientOptions, type ClientTls } from "./clients.js";
import { MESH_IDENTITIES, Pki, type IdentityFiles, type MeshIdentity } from "./pki.js";
import { PostgresServer } from "./postgres.js";
import { ServiceProcess } from "./service-process.js";
import { allowServiceLogins, ownedDatabase, serviceUrl } from "./database-roles.js";
import type { ServiceRole } from "../../services/shared/db/db-roles.js";

export interface MeshOptions {
  /** Folder for secrets and logs; a temp dir (removed on stop) by default. */
  stateDir?: string;
  /** Use this PostgreSQL server instead of starting one (databases are created on it). */
  postgres?: PostgresServer;
  /**
   * Put some databases on servers of their own (drills stop one without the others); a server
   * here is anything with an admin URL, e.g. a replicated paydb behind a stable address.
   */
  servers?: Partial<Record<DatabaseKind, { url(database: string): string }>>;
  /** Or: an existing server URL (postgres://user@host:port), e.g. from RAILFENCE_TEST_PG_URL. */
  postgresUrl?: string;
  /** Suffix for database names so several meshes can share one server. */
  dbSuffix?: string;
  durable?: boolean;
  proxies?: number;
  proxyEnv?: Record<string, string>;
  lockEnv?: Record<string, string>;
  /** Node flags for the proxy processes (profiling: ["--cpu-prof", "--cpu-prof-dir=..."]). */
  proxyNodeArgs?: string[];
  /** Node flags for the executors and the lock service (profiling the end-to-end path). */
  b3NodeArgs?: string[];
  executorEnv?: Record<string, string>;
  railStubEnv?: Record<string, string>;
  onLine?: (name: string, line: string) => void;
  persistentPostgres?: boolean;
  /**
   * Mutual TLS everywhere: a throwaway PKI under <stateDir>/pki, each process with its own
   * identity's certificate, https:// URLs. Off by default (tests talk h2c on loopback).
   */
  tls?: boolean;
  /** Share a token-signing key between the lock service and the proxies (signed fencing tokens). */
  signTokens?: boolean;
}

export class Mesh {
  postgres: PostgresServer | undefined;
  readonly databases: Record<DatabaseKind, string> = { paydb: "", raildb: "", lockdb: "" };
  /** The same databases as their owner (migrations, and the harness's own SQL). */
  readonly ownerUrls: Partial<Record<DatabaseKind, string>> = {};
  railStub!: ServiceProcess;
  readonly proxies: ServiceProcess[] = [];
  /** Started by startSpareProxy: stopped with the mesh, never handed to a client. */
  readonly spareProxies: ServiceProcess[] = [];
  lock: ServiceProcess | undefined;
  payouts: ServiceProcess | undefined;
  readonly executors: ServiceProcess[] = [];
  reconciler: ServiceProcess | undefined;
  credentialFile!: string;
  /** Never logged; tests use it only to prove it never appears in output. */
  credential!: string;
  private ownsStateDir = false;
  private readonly stopHooks: Array<() => Promise<void>> = [];
  private ownsPostgres = false;
  /** The mesh's PKI when tls is on (created by start() / startPki()). */
  pki: Pki | undefined;
  private readonly identities = new Map<string, IdentityFiles>();

  readonly stateDir: string;

  constructor(readonly opts: MeshOptions = {}) {
    this.stateDir = opts.stateDir ?? mkdtempSync(join(tmpdir(), "railfence-mesh-"));
  }

  /** Creates the CA and every mesh identity's certificate (idempotent; start() calls it). */
  async startPki(): Promise<void> {
    if (!this.opts.tls || this.pki) return;
    this.ownsStateDir = !this.opts.stateDir;
    this.pki = await Pki.create(join(this.stateDir, "pki"));
    for (const id of MESH_IDENTITIES) this.identities.set(id, await this.pki.issue(id));
  }

  /** The files of a mesh identity (tls meshes only). */
  identityFiles(identity: MeshIdentity): IdentityFiles {
    const files = this.identities.get(identity);
    if (!files) throw new Error(`no certificate for ${identity}: is this a tls mesh, started?`);
    return files;
  }

  /** TLS_* env of a process running as identity; empty on an h2c mesh. */
  tlsEnv(identity: MeshIdentity): Record<string, string> {
    return this.opts.tls ? Pki.env(this.identityFiles(identity)) : {};
  }

  /** What a client calling as identity presents: its certificate on a tls mesh, nothing on an h2c one. */
  clientTls(identity: MeshIdentity = "operator"): ClientTls | undefined {
    return this.opts.tls ? this.identityFiles(identity) : undefined;
  }

  /** A client of service at url (one of this mesh's processes) calling as identity (clients.ts). */
  client<S extends DescService>(service: S, url: string, identity: MeshIdentity = "operator", opts: Omit<ClientOptions, "tls"> = {}): Client<S> {
    return connectClient(service, url, { ...opts, tls: this.clientTls(identity) });
  }

  /** Base URL of the rail-stub's control API. */
  get railControlUrl(): string {
    return `${this.opts.tls ? "https" : "http"}://127.0.0.1:${this.railStub.ready!.controlPort}`;
  }

  /** Database URL for kind on the mesh's server. */
  dbUrl(kind: DatabaseKind): string {
    return this.databases[kind];
  }

  /** Database URL for kind, logged in as service `role` (least privilege; see shared/db/db-roles.ts). */
  roleUrl(kind: DatabaseKind, role: ServiceRole): string {
    return serviceUrl(this.databases[kind], role);
  }

  /**
   * paydb and lockdb as a deployment has them: owned by the owner role that migrates them,
   * every service logging in with its own role. raildb belongs to the third party (the stub).
   */
  async startDatabases(): Promise<void> {
    this.ownsStateDir = !this.opts.stateDir;
    const suffix = this.opts.dbSuffix ?? "";
    const migrateUrls = this.ownerUrls;
    const create = async (adminUrl: string, kind: DatabaseKind) => {
      const { url, migrateUrl } = await ownedDatabase(adminUrl, `${kind}${suffix}`);
      this.databases[kind] = url;
      migrateUrls[kind] = migrateUrl;
    };
    let adminUrl: string;
    if (this.opts.postgresUrl) {
      adminUrl = this.opts.postgresUrl;
    } else {
      this.postgres = this.opts.postgres;
      if (!this.postgres) {
        this.ownsPostgres = true;
        this.postgres = await PostgresServer.start({
          durable: this.opts.durable ?? false,
          ...(this.opts.persistentPostgres ? { dataDir: join(this.stateDir, "pgdata"), persistent: true } : {}),
        });
      }
      adminUrl = this.postgres.url("postgres");
    }
    const own = this.opts.servers ?? {};
    for (const kind of ["paydb", "raildb", "lockdb"] as const) await create(own[kind]?.url("postgres") ?? adminUrl, kind);
    await migrate(migrateUrls.paydb!, "paydb");
    await migrate(migrateUrls.lockdb!, "lockdb");
    // Signed tokens: paydb verifies every payout fence with the lock's key (migration 014).
    if (this.tokenKeyFile) await installFenceSigningKey(migrateUrls.paydb!, signingKeyFromFile(this.tokenKeyFile, "token-signing key")!);
    for (const server of new Set([adminUrl, ...Object.values(own).map((s) => s!.url("postgres"))])) await allowServiceLogins(server);
  }

  /** A fresh random rail credential in a 0600 file (never in env values or argv). */
  writeCredential(): void {
    mkdirSync(join(this.stateDir, "secrets"), { recursive: true, mode: 0o700 });
    this.credentialFile = join(this.stateDir, "secrets", "rail-credential");
    this.credential = `rk_${randomBytes(24).toString("hex")}`;
    writeFileSync(this.credentialFile, `${this.credential}\n`, { mode: 0o600 });
    if (this.opts.signTokens) {
      this.tokenKeyFile = join(this.stateDir, "secrets", "token-signing-key");
      writeFileSync(this.tokenKeyFile, `${randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
    }
  }

  /** The token-signing key file (signTokens only): lock signs, proxies verify. */
  tokenKeyFile: string | undefined;

  async startRailStub(env: Record<string, string> = {}): Promise<ServiceProcess> {
    this.railStub = new ServiceProcess({
      service: "rail-stub",
      env: {
        PORT: "0",
        METRICS_PORT: "0",
        RAIL_STUB_CONTROL_PORT: "0",
        RAILDB_URL: this.databases.raildb,
        RAIL_CREDENTIALS_FILE: this.credentialFile,
        ...this.tlsEnv("rail"),
        ...this.opts.railStubEnv,
        ...env,
      },
      onLine: this.opts.onLine,
      tls: this.opts.tls,
    });
    await this.railStub.start();
    return this.railStub;
  }

  proxyEnv(replica: number, env: Record<string, string> = {}): Record<string, string> {
    return {
      PORT: "0",
      METRICS_PORT: "0",
      PAYDB_URL: this.roleUrl("paydb", "rail-proxy"),
      // One PostgreSQL with its own storage: what the harness runs (paydb-durability.ts).
      PAYDB_DURABILITY: "single-node",
      RAIL_URL: this.railStub.url,
      RAIL_CREDENTIALS_FILE: this.credentialFile,
      REPLICA_ID: `rail-proxy-${replica}`,
      ...(this.tokenKeyFile ? { RAIL_PROXY_TOKEN_KEY_FILE: this.tokenKeyFile } : {}),
      ...this.tlsEnv("rail-proxy"),
      ...this.opts.proxyEnv,
      ...env,
    };
  }

  /** Starts one more rail-proxy replica. */
  async addProxy(env: Record<string, string> = {}): Promise<ServiceProcess> {
    const replica = this.proxies.length + 1;
    return this.startProxy(this.proxies, `rail-proxy-${replica}`, this.proxyEnv(replica, env));
  }

  /**
   * A rail-proxy replica no executor, reconciler or proxy-kill knows of (not in `proxies`): a
   * drill's own client is its only caller, so freezing it freezes that call alone.
   */
  async startSpareProxy(name: string, env: Record<string, string> = {}): Promise<ServiceProcess> {
    return this.startProxy(this.spareProxies, name, this.proxyEnv(0, { REPLICA_ID: name, ...env }));
  }

  private async startProxy(list: ServiceProcess[], name: string, env: Record<string, string>): Promise<ServiceProcess> {
    // A statement guard removed: the proxy admits through harness_rail_admit, installed here first.
    if (controlsIn("rail-proxy", { ...process.env, ...env }).length > 0) {
      const g = statementGuardsFrom({ ...process.env, ...env });
      if (!(g.mark && g.binding && g.oneLive)) await installUnguardedAdmission(this.ownerUrls.paydb!);
    }
    const proxy = new ServiceProcess({ service: "rail-proxy", name, env, onLine: this.opts.onLine, tls: this.opts.tls, nodeArgs: this.opts.proxyNodeArgs });
    list.push(proxy);
    await proxy.start();
    return proxy;
  }

  /** Comma-separated proxy addresses: executors round-robin over them like a Service would. */
  proxyUrls(): string {
    return this.proxies
      .filter((p) => p.ready)
      .map((p) => p.url)
      .join(",");
  }

  async startLock(env: Record<string, string> = {}): Promise<ServiceProcess> {
    this.lock = new ServiceProcess({
      service: "lock",
      env: {
        PORT: "0",
        METRICS_PORT: "0",
        LOCK_BACKEND: "pg",
        LOCKDB_URL: this.roleUrl("lockdb", "lock"),
        ...(this.tokenKeyFile ? { LOCK_TOKEN_SIGNING_KEY_FILE: this.tokenKeyFile } : {}),
        ...this.tlsEnv("lock"),
        ...this.opts.lockEnv,
        ...env,
      },
      onLine: this.opts.onLine,
      tls: this.opts.tls,
      nodeArgs: this.opts.b3NodeArgs,
    });
    await this.lock.start();
    return this.lock;
  }

  async startPayouts(env: Record<string, string> = {}): Promise<ServiceProcess> {
    this.payouts = new ServiceProcess({
      service: "payouts",
      // Drills and the benchmark create payouts in bulk from one client: a rate limit that fits them.
      env: { PORT: "0", METRICS_PORT: "0", PAYDB_URL: this.roleUrl("paydb", "payouts"), LIMIT_CLIENT_REQUESTS: "1000000", ...this.tlsEnv("payouts"), ...env },
      onLine: this.opts.onLine,
      tls: this.opts.tls,
    });
    await this.payouts.start();
    return this.payouts;
  }

  executorEnv(n: number, env: Record<string, string> = {}): Record<string, string> {
    if (!this.lock) throw new Error("start the lock service before executors");
    return {
      METRICS_PORT: "0",
      PAYDB_URL: this.roleUrl("paydb", "executor"),
      LOCK_URL: this.lock.url,
      RAIL_PROXY_URLS: this.proxyUrls(),
      EXECUTOR_ID: `executor-${n}`,
      ...this.tlsEnv("executor"),
      ...this.opts.executorEnv,
      ...env,
    };
  }

  async addExecutor(env: Record<string, string> = {}): Promise<ServiceProcess> {
    const n = this.executors.length + 1;
    const executor = new ServiceProcess({
      service: "executor",
      name: `executor-${n}`,
      env: this.executorEnv(n, env),
      onLine: this.opts.onLine,
      nodeArgs: this.opts.b3NodeArgs,
    });
    this.executors.push(executor);
    await executor.start();
    return executor;
  }

  reconcilerEnv(env: Record<string, string> = {}): Record<string, string> {
    return { METRICS_PORT: "0", PAYDB_URL: this.roleUrl("paydb", "reconciler"), RAIL_PROXY_URLS: this.proxyUrls(), ...this.tlsEnv("reconciler"), ...env };
  }

  /** The reconciler on a schedule (RECONCILE_INTERVAL_MS > 0), as `npm start` runs it. */
  async startReconciler(env: Record<string, string> = {}): Promise<ServiceProcess> {
    this.reconciler = new ServiceProcess({
      service: "reconciler",
      env: this.reconcilerEnv({ RECONCILE_INTERVAL_MS: "10000", ...env }),
      onLine: this.opts.onLine,
    });
    await this.reconciler.start();
    return this.reconciler;
  }

  /** One reconciler run (the CronJob mode); resolves with its exit code and output lines. */
  async reconcileOnce(env: Record<string, string> = {}): Promise<{ code: number | null; lines: string[] }> {
    const once = new ServiceProcess({
      service: "reconciler",
      name: "reconciler-once",
      env: this.reconcilerEnv({ RECONCILE_INTERVAL_MS: "0", ...env }),
      waitReady: false,
      onLine: this.opts.onLine,
    });
    await once.start();
    const code = await once.waitExit();
    return { code, lines: once.lines };
  }

  /** PKI (tls meshes), PostgreSQL, credential, rail-stub and the proxies. */
  async start(): Promise<this> {
    await this.startPki();
    this.writeCredential();
    await this.startDatabases();
    await this.startRailStub();
    for (let i = 0; i < (this.opts.proxies ?? 2); i++) await this.addProxy();
    return this;
  }

  /** Every service process, for stop-all and log scans. */
  processes(): ServiceProcess[] {
    return [...this.executors, this.reconciler, this.payouts, this.lock, ...this.proxies, ...this.spareProxies, this.railStub].filter(
      (p): p is ServiceProcess => !!p,
    );
  }

  allLines(): string[] {
    return this.processes().flatMap((p) => p.lines);
  }

  /** The highest fencing token paydb has seen (marks and payout fences): a safe LOCK_TOKEN_FLOOR. */
  async highestTokenSeen(): Promise<bigint> {
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: this.databases.paydb });
    await c.connect();
    try {
      const { rows } = await c.query<{ m: string }>(
        "SELECT GREATEST((SELECT COALESCE(max(mark), 0) FROM rail_high_water), (SELECT COALESCE(max(fence), 0) FROM payouts))::text AS m",
      );
      return BigInt(rows[0]!.m);
    } finally {
      await c.end();
    }
  }

  /** Registers something else to stop (after the processes, before PostgreSQL). */
  onStop(hook: () => Promise<void>): void {
    this.stopHooks.push(hook);
  }

  /** Stops every process (graceful, bounded; clients first), then PostgreSQL and the temp state. */
  async stop(): Promise<void> {
    await Promise.all([...this.executors, this.reconciler].filter((p): p is ServiceProcess => !!p).map((p) => p.stop(5000)));
    await Promise.all(this.processes().map((p) => p.stop(5000)));
    for (const hook of this.stopHooks.splice(0)) await hook();
    if (this.ownsPostgres) await this.postgres?.destroy();
    if (this.ownsStateDir) rmSync(this.stateDir, { recursive: true, force: true });
  }
}
