/**
 * Fixtures for the lock conformance suite: a backend the test owns (its own PostgreSQL or etcd
 * process, so it can be stopped and restarted) and the real lock service as an OS process.
 */
import { ConnectError, type Client } from "@connectrpc/connect";
import { EtcdServer } from "../../tools/harness/etcd.js";
import { allowServiceLogins, ownedDatabase, serviceUrl } from "../../tools/harness/database-roles.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { migrate } from "../../services/shared/db/migrate.js";
import { connectClient } from "../support/clients.js";
import { eventually } from "../support/time.js";

export interface BackendFixture {
  readonly name: "pg" | "etcd";
  start(): Promise<void>;
  /** Environment that points a lock service at this backend. */
  env(): Record<string, string>;
  /** Makes the backend unreachable (process stopped, data kept). */
  stop(): Promise<void>;
  /** Starts it again on the same port with the same data. */
  resume(): Promise<void>;
  /** A crash-like restart (etcd: SIGKILL; PostgreSQL: immediate shutdown), data kept. */
  crashRestart(): Promise<void>;
  destroy(): Promise<void>;
}

/**
 * lockdb `name` on the server at adminUrl, as a deployment has it: migrated by the migration
 * job (the lock service only checks the schema), and the URL the lock service logs in with.
 */
export async function migratedLockdb(adminUrl: string, name: string): Promise<string> {
  const { url, migrateUrl } = await ownedDatabase(adminUrl, name);
  await migrate(migrateUrl, "lockdb");
  await allowServiceLogins(adminUrl);
  return serviceUrl(url, "lock");
}

export function pgFixture(): BackendFixture {
  let server: PostgresServer | undefined;
  let url = "";
  return {
    name: "pg",
    async start() {
      server = await PostgresServer.start({ durable: false });
      url = await migratedLockdb(server.url("postgres"), "lockdb");
    },
    env: () => ({ LOCK_BACKEND: "pg", LOCKDB_URL: url }),
    stop: async () => server!.stop("fast"),
    resume: async () => server!.startProcess(),
    async crashRestart() {
      await server!.stop("immediate");
      await server!.startProcess();
    },
    destroy: async () => server?.destroy(),
  };
}

export function etcdFixture(prefix = "railfence/locks/"): BackendFixture {
  let server: EtcdServer | undefined;
  return {
    name: "etcd",
    async start() {
      server = await EtcdServer.start();
    },
    env: () => ({ LOCK_BACKEND: "etcd", ETCD_ENDPOINTS: server!.endpoint, ETCD_PREFIX: prefix }),
    stop: async () => server!.stop(),
    resume: async () => server!.restart(),
    async crashRestart() {
      await server!.kill();
      await server!.restart();
    },
    destroy: async () => server?.destroy(),
  };
}

export type LockClient = Client<typeof LockService>;

/** The real lock service process plus a client for it. */
export class LockServiceUnderTest {
  readonly proc: ServiceProcess;
  client!: LockClient;

  constructor(env: Record<string, string>) {
    this.proc = new ServiceProcess({
      service: "lock",
      env: { PORT: "0", METRICS_PORT: "0", LOCK_BACKEND_TIMEOUT_MS: "1500", DRAIN_MS: "2000", ...env },
    });
  }

  async start(env: Record<string, string> = {}): Promise<this> {
    await this.proc.start(env);
    this.connect();
    return this;
  }

  /** SIGKILL and start again on the same ports. */
  async restart(env: Record<string, string> = {}): Promise<void> {
    await this.proc.restart(env);
    this.connect();
  }

  async stop(): Promise<void> {
    await this.proc.stop(5000);
  }

  get metricsUrl(): string {
    return `http://127.0.0.1:${this.proc.ready!.metricsPort}/metrics`;
  }

  private connect(): void {
    this.client = connectClient(LockService, this.proc.url);
  }
}

/** The error a call fails with (fails the test if it succeeds). */
export async function rejection(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("expected the call to be refused, but it succeeded");
}

/** Retries fn until it stops throwing (recovery after a backend restart): eventually() with throws as "not yet". */
export async function untilSucceeds<T>(fn: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  return (await eventually(async () => ({ value: await fn() }), "the call to succeed", { timeoutMs, everyMs: 200, retryOnThrow: true })).value;
}
