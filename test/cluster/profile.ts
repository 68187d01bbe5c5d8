/**
 * Everything railfence-specific about the test cluster's installation, in one place: where
 * PostgreSQL runs and with which logins, the Secrets the chart is pointed at, and the values
 * profile `helm install` gets. When the chart's database contract changes, this file is the one
 * to adapt.
 *
 * PostgreSQL runs as a process on the node, outside the cluster, listening on the pod bridge's
 * gateway address. That is the production topology the chart is written for (Cloud SQL / RDS:
 * a PRIMARY endpoint outside the cluster, docs/deploy.md; the chart ships no database), and it
 * needs no database image (there is no registry here). Logins are as docs/deploy.md asks a DBA
 * for them: the owner role (CREATEROLE, not a superuser) owning paydb and lockdb, which the
 * migration Job runs as, and the rail stub's login owning raildb; the migration Job then creates
 * every component's login role (migrations.provisionLogins) with the password from that
 * component's own Secret. Pods log in by password (scram-sha-256, pg_hba for the pod network
 * only); the node's own tools use the loopback trust the harness always uses.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { OWNER_ROLE } from "../../services/shared/db/db-roles.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import type { ClusterInfo, Kube } from "./kube.js";

export const NAMESPACE = "railfence";
export const RELEASE = "railfence";

type Db = "paydb" | "lockdb" | "raildb";

export interface DatabaseLogin {
  /** The chart key this login fills: database.<db>.credentials.<key>, or database.raildb (the stub's only one). */
  chartKey: string;
  /** The chart component that logs in with it ("migrate" for the owner). */
  component: string;
  database: Db;
  role: string;
  /** The Secret its password lives in (key "password"), mounted by the chart into that component only. */
  secret: string;
  /** "dba": made on the node before the install; "job": by the chart's migration Job. */
  createdBy: "dba" | "job";
}

/** The owner, the stub's login, and one login per component, each with a Secret of its own. */
export const LOGINS: readonly DatabaseLogin[] = [
  // One owner for both databases (the chart allows it: the migration Job is one component).
  {
    chartKey: "database.paydb.credentials.migrations",
    component: "migrate",
    database: "paydb",
    role: OWNER_ROLE,
    secret: `${RELEASE}-db-owner`,
    createdBy: "dba",
  },
  {
    chartKey: "database.lockdb.credentials.migrations",
    component: "migrate",
    database: "lockdb",
    role: OWNER_ROLE,
    secret: `${RELEASE}-db-owner`,
    createdBy: "dba",
  },
  ...(
    [
      ["railProxy", "rail-proxy", "paydb", "railfence_rail_proxy_login"],
      ["executor", "executor", "paydb", "railfence_executor_login"],
      ["payouts", "payouts", "paydb", "railfence_payouts_login"],
      ["reconciler", "reconciler", "paydb", "railfence_reconciler_login"],
      ["auditor", "audit", "paydb", "railfence_auditor_login"],
      ["lock", "lock", "lockdb", "railfence_lock_login"],
    ] as const
  ).map(([key, component, database, role]) => ({
    chartKey: `database.${database}.credentials.${key}`,
    component,
    database,
    role,
    secret: `${RELEASE}-db-${component}`,
    createdBy: "job" as const,
  })),
  { chartKey: "database.raildb", component: "rail-stub", database: "raildb", role: "railstub", secret: `${RELEASE}-db-rail-stub`, createdBy: "dba" },
];

export interface Databases {
  server: PostgresServer;
  /** URLs as the chart takes them: no user, no password (the chart adds each component's user). */
  podUrl(db: Db): string;
  /** URLs for the node's own tools (queries, the host-side audit): loopback, trust; `role` logs in as that role. */
  nodeUrl(db: Db, role?: string): string;
  /** Secret name -> password (random per run; they leave this process only into Secrets). */
  passwords: Record<string, string>;
}

export const RAIL_SECRET = `${RELEASE}-rail`;

/** Starts PostgreSQL on the node (durable: fsync and synchronous commit on) and makes what a DBA provides. */
export async function startDatabases(info: ClusterInfo, log: (line: string) => void): Promise<Databases> {
  const server = await PostgresServer.start({
    durable: true,
    listenAddresses: [info.nodeIp],
    hba: [`host all all ${info.podCidr} scram-sha-256`],
    log: (l) => {
      if (/ERROR|FATAL|PANIC/.test(l)) log(`postgres: ${l.trim()}`);
    },
  });
  const passwords: Record<string, string> = {};
  for (const l of LOGINS) passwords[l.secret] ??= randomBytes(18).toString("base64url");
  const admin = new pg.Client({ connectionString: server.url("postgres") });
  await admin.connect();
  try {
    const made = new Set<string>();
    for (const l of LOGINS.filter((x) => x.createdBy === "dba")) {
      if (!made.has(l.role)) {
        const createRole = l.component === "migrate" ? " CREATEROLE" : "";
        await admin.query(`CREATE ROLE ${admin.escapeIdentifier(l.role)} LOGIN${createRole} PASSWORD ${admin.escapeLiteral(passwords[l.secret]!)}`);
        made.add(l.role);
      }
      await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(l.database)} OWNER ${admin.escapeIdentifier(l.role)}`);
    }
  } finally {
    await admin.end();
  }
  return {
    server,
    passwords,
    podUrl: (db) => `postgresql://${info.nodeIp}:${server.port}/${db}?sslmode=disable`,
    nodeUrl: (db, role) => {
      const u = new URL(server.url(db));
      if (role) u.username = role;
      return u.toString();
    },
  };
}

/** The namespace (Pod Security "restricted", enforced) and the Secrets the profile names. */
export function prepareNamespace(kube: Kube, dbs: Databases): void {
  kube.must(
    ["apply", "-f", "-"],
    JSON.stringify({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: NAMESPACE,
        labels: {
          "pod-security.kubernetes.io/enforce": "restricted",
          "pod-security.kubernetes.io/enforce-version": "latest",
          "pod-security.kubernetes.io/warn": "restricted",
          "pod-security.kubernetes.io/audit": "restricted",
        },
      },
    }),
  );
  for (const [secret, password] of Object.entries(dbs.passwords)) {
    kube.must(["-n", NAMESPACE, "create", "secret", "generic", secret, `--from-literal=password=${password}`]);
  }
  kube.must(["-n", NAMESPACE, "create", "secret", "generic", RAIL_SECRET, `--from-literal=credential=${randomBytes(24).toString("base64url")}`]);
}

export interface ProfileOptions {
  imageRepository: string;
  imageTag: string;
  otlpEndpoint: string;
  info: ClusterInfo;
  dbs: Databases;
}

/**
 * The values profile for this cluster: the chart's secure defaults, as an operator gets them
 * (mutual TLS from the chart's own CA, signed fencing tokens from its generated key; nothing
 * about either is set here). Probes are then HTTP probes on each server's metrics port (the
 * kubelet presents no client certificate). The development rail (rail-stub) answers after
 * 150 ms (as in the container smoke test) so that a killed rail-proxy pod dies with calls in flight.
 */
export function valuesProfile(o: ProfileOptions): Record<string, unknown> {
  const database: Record<string, Record<string, unknown>> = {
    // One PostgreSQL process for the test: no failover.
    paydb: { durability: "single-node", url: o.dbs.podUrl("paydb"), credentials: {} },
    lockdb: { url: o.dbs.podUrl("lockdb"), credentials: {} },
  };
  for (const l of LOGINS) {
    const cred = { user: l.role, existingSecret: l.secret, passwordKey: "password", password: "" };
    if (l.database === "raildb") database.raildb = { url: o.dbs.podUrl("raildb"), ...cred };
    else (database[l.database]!.credentials as Record<string, unknown>)[l.chartKey.split(".").pop()!] = cred;
  }
  const nodeOnly = [`${o.info.nodeIp}/32`];
  const small = { requests: { cpu: "50m", memory: "96Mi" }, limits: { cpu: "1", memory: "256Mi" } };
  return {
    image: { repository: o.imageRepository, tag: o.imageTag, digest: "", pullPolicy: "Never" },
    otel: {
      enabled: true,
      endpoint: o.otlpEndpoint,
      protocol: "http/protobuf",
      serviceNamespace: "railfence",
      environment: "test-cluster",
      resourceAttributes: {},
    },
    database,
    rail: { existingSecret: RAIL_SECRET, credentialKey: "credential" },
    railStub: { enabled: true, resources: small, faults: JSON.stringify([{ kind: "LATENCY", latencyMs: 150, count: 0, clientReferencePrefix: "" }]) },
    // One node: the zone and host spread constraints cannot be met and must not block scheduling.
    topology: { zoneWhenUnsatisfiable: "ScheduleAnyway", hostWhenUnsatisfiable: "ScheduleAnyway" },
    // NOT_PAID only after the rail's statement has had time to show a payment: kept short so a
    // drill's reconciliation runs within the test, still well above the chart's floor (rail
    // 2 x deadline + ambiguity margin + admission timeout: 20 s with the chart's defaults).
    reconciler: { settlementWindowMs: 30000, resources: small },
    payouts: { clientCIDRs: nodeOnly, resources: small },
    // Requests sized for one 2-CPU node: with the chart's defaults a rolling update's surge pods
    // wait for CPU ("Insufficient cpu") until old pods are gone. Limits stay as the chart has them.
    lock: { resources: small },
    executor: { resources: small },
    railProxy: { resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "2", memory: "384Mi" } } },
    migrations: { resources: small },
    networkPolicy: {
      postgres: { cidrs: nodeOnly, port: o.dbs.server.port },
      otlp: { namespace: "observability", podLabels: {}, cidrs: nodeOnly, port: Number(new URL(o.otlpEndpoint).port) },
    },
  };
}

export function writeProfile(dir: string, name: string, values: Record<string, unknown>): string {
  const file = join(dir, name);
  // JSON is YAML: helm reads it as a values file.
  writeFileSync(file, JSON.stringify(values, null, 2));
  return file;
}
