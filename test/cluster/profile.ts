/**
 * Everything railfence-specific about the test cluster's installation, in one place: where
 * PostgreSQL runs and with which roles, the Secrets the chart is pointed at, and the values
 * profile `helm install` gets. When the chart's database contract changes (e.g. one role per
 * component), this file is the one to adapt.
 *
 * PostgreSQL runs as a process on the node, outside the cluster, listening on the pod bridge's
 * gateway address. That is the production topology the chart is written for (Cloud SQL / RDS:
 * a PRIMARY endpoint outside the cluster, docs/deploy.md; the chart ships no database), it
 * needs no database image (there is no registry here), and the invariant checker reads the
 * same server from the node. Pods reach it by password (scram-sha-256, pg_hba for the pod
 * network only); the node's own tools use the loopback trust the harness always uses.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { PostgresServer } from "../../services/harness/postgres.js";
import type { ClusterInfo, Kube } from "./kube.js";

export const NAMESPACE = "railfence";
export const RELEASE = "railfence";

/** Login roles the pods use, with the databases each owns (the chart's default URLs name them). */
const ROLES = {
  railfence: ["paydb", "lockdb"],
  railstub: ["raildb"],
} as const;
type Role = keyof typeof ROLES;
type Db = "paydb" | "lockdb" | "raildb";
const OWNER: Record<Db, Role> = { paydb: "railfence", lockdb: "railfence", raildb: "railstub" };

export interface Databases {
  server: PostgresServer;
  /** URLs as pods see them (no password; the password is in the Secret `secretOf(db)`). */
  podUrl(db: Db): string;
  /** URLs for the node's own tools (checker, queries): loopback, trust. */
  nodeUrl(db: Db): string;
  passwords: Record<Role, string>;
}

export const secretOf = (db: Db) => `${RELEASE}-${db}`;
export const RAIL_SECRET = `${RELEASE}-rail`;

/** Starts PostgreSQL on the node (durable: fsync and synchronous commit on) and makes the roles and databases. */
export async function startDatabases(info: ClusterInfo, log: (line: string) => void): Promise<Databases> {
  const server = await PostgresServer.start({
    durable: true,
    listenAddresses: [info.nodeIp],
    hba: [`host all all ${info.podCidr} scram-sha-256`],
    log: (l) => {
      if (/ERROR|FATAL|PANIC/.test(l)) log(`postgres: ${l.trim()}`);
    },
  });
  const passwords = { railfence: randomBytes(18).toString("base64url"), railstub: randomBytes(18).toString("base64url") };
  const admin = new pg.Client({ connectionString: server.url("postgres") });
  await admin.connect();
  try {
    for (const [role, dbs] of Object.entries(ROLES) as Array<[Role, readonly Db[]]>) {
      // Passwords are random per run and never leave this process except into Secrets.
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${passwords[role]}'`);
      for (const db of dbs) await admin.query(`CREATE DATABASE ${db} OWNER ${role}`);
    }
  } finally {
    await admin.end();
  }
  return {
    server,
    passwords,
    podUrl: (db) => `postgresql://${OWNER[db]}@${info.nodeIp}:${server.port}/${db}?sslmode=disable`,
    nodeUrl: (db) => server.url(db),
  };
}

/** The namespace (Pod Security "restricted", enforced) and the Secrets the profile names. */
export function prepareNamespace(kube: Kube, dbs: Databases): void {
  kube.must(["apply", "-f", "-"], JSON.stringify({
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
  }));
  for (const db of ["paydb", "lockdb", "raildb"] as const) {
    kube.must(["-n", NAMESPACE, "create", "secret", "generic", secretOf(db), `--from-literal=password=${dbs.passwords[OWNER[db]]}`]);
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
 * The values profile for this cluster. Cleartext h2c between pods (tls.enabled=false with
 * allowInsecure): that is the chart mode whose probes are gRPC probes against
 * grpc.health.v1, which is what this cluster verifies; the TLS mode's HTTP probes are not
 * exercised here. The development rail (rail-stub) answers after 80 ms so that a killed
 * rail-proxy pod dies with calls in flight.
 */
export function valuesProfile(o: ProfileOptions): Record<string, unknown> {
  const db = (name: Db) => ({ url: o.dbs.podUrl(name), existingSecret: secretOf(name), passwordKey: "password", password: "" });
  const nodeOnly = [`${o.info.nodeIp}/32`];
  const small = { requests: { cpu: "50m", memory: "96Mi" }, limits: { cpu: "1", memory: "256Mi" } };
  return {
    image: { repository: o.imageRepository, tag: o.imageTag, digest: "", pullPolicy: "Never" },
    otel: { enabled: true, endpoint: o.otlpEndpoint, protocol: "http/protobuf", serviceNamespace: "railfence", environment: "test-cluster", resourceAttributes: {} },
    tls: { enabled: false, allowInsecure: true },
    database: { paydb: db("paydb"), lockdb: db("lockdb"), raildb: db("raildb") },
    rail: { existingSecret: RAIL_SECRET, credentialKey: "credential" },
    railStub: { enabled: true, resources: small, faults: JSON.stringify([{ kind: "LATENCY", latencyMs: 80, count: 0, clientReferencePrefix: "" }]) },
    // One node: the zone and host spread constraints cannot be met and must not block scheduling.
    topology: { zoneWhenUnsatisfiable: "ScheduleAnyway", hostWhenUnsatisfiable: "ScheduleAnyway" },
    // NOT_PAID only after the rail's statement has had time to show a payment: kept short so a
    // drill's reconciliation runs within the test, still well above deadline + margin (10 s).
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
