/**
 * The installation the container smoke test runs, in one place: the Helm values the chart is
 * rendered with, the database logins, the content of every Secret, and the few settings the
 * test adds on top of the chart (each with its reason). Everything else about a container
 * (command, environment, user, mounts, limits, probes) comes from the rendered chart.
 *
 * Database logins are as docs/deploy.md asks a DBA for them: one owner role (CREATEROLE, not a
 * superuser, owning paydb and lockdb) for the migration Job, and the rail stub's own login for
 * raildb; the migration Job then creates every component's login role (migrations.provisionLogins)
 * with the password from that component's own Secret, and each pod logs in as its own role.
 */
import { randomBytes } from "node:crypto";

export const RELEASE = "railfence";
export const NAMESPACE = "railfence-smoke";
/** Network alias of the PostgreSQL container (the database host in every URL). */
export const POSTGRES_HOST = "postgres";

export type Database = "paydb" | "lockdb" | "raildb";

export interface DatabaseLogin {
  /** The chart key this login fills: database.<db>.credentials.<key>, or database.raildb (the stub's only one). */
  chartKey: string;
  /** The chart component that logs in with it ("migrate" for the owner). */
  component: string;
  database: Database;
  role: string;
  /** The Kubernetes Secret the password lives in (mounted as a file by the chart). */
  secret: string;
  password: string;
  /** "dba": made before the install (the test's PostgreSQL set-up); "job": by the migration Job. */
  createdBy: "dba" | "job";
}

const password = () => randomBytes(18).toString("base64url");

/** The owner, the stub's login, and one login per component, each with a Secret of its own. */
export function databaseLogins(): DatabaseLogin[] {
  const owner = { role: "railfence_owner", secret: "smoke-db-owner", password: password(), component: "migrate", createdBy: "dba" as const };
  const job = (key: string, component: string, database: Database, role: string): DatabaseLogin => ({
    chartKey: `database.${database}.credentials.${key}`,
    component,
    database,
    role,
    secret: `smoke-db-${component}`,
    password: password(),
    createdBy: "job",
  });
  return [
    // One owner for both databases (the chart allows it: the migration Job is one component).
    { ...owner, chartKey: "database.paydb.credentials.migrations", database: "paydb" },
    { ...owner, chartKey: "database.lockdb.credentials.migrations", database: "lockdb" },
    job("railProxy", "rail-proxy", "paydb", "railfence_rail_proxy_login"),
    job("executor", "executor", "paydb", "railfence_executor_login"),
    job("payouts", "payouts", "paydb", "railfence_payouts_login"),
    job("reconciler", "reconciler", "paydb", "railfence_reconciler_login"),
    job("auditor", "audit", "paydb", "railfence_auditor_login"),
    job("lock", "lock", "lockdb", "railfence_lock_login"),
    {
      chartKey: "database.raildb",
      component: "rail-stub",
      database: "raildb",
      role: "railstub",
      secret: "smoke-db-rail-stub",
      password: password(),
      createdBy: "dba",
    },
  ];
}

export const RAIL_SECRET = "smoke-rail-credential";
export const PASSWORD_KEY = "password";
export const CREDENTIAL_KEY = "credential";

/** Secret name -> key -> content: what `kubectl create secret` would hold. */
export function secrets(logins: DatabaseLogin[], railCredential: string): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = { [RAIL_SECRET]: { [CREDENTIAL_KEY]: railCredential } };
  for (const l of logins) out[l.secret] = { [PASSWORD_KEY]: l.password };
  return out;
}

/** Timings shortened so ambiguity is swept and reconciled within a test run. */
export const TIMINGS = {
  railDeadlineMs: 2000,
  ambiguityMarginMs: 2000,
  // statement_timeout of the proxy's admission; a forward may start this long after created_at.
  admissionTimeoutMs: 3000,
  // No rail call starts later than this after the admission statement was sent: below the
  // margin, as the chart requires, so the sweeper never declares a row whose call may still start.
  forwardBudgetMs: 1000,
  sweepIntervalMs: 500,
  // "Not on the statement" means NOT_PAID only after this: above 2 x deadline + margin + admission
  // timeout (9 s), as the chart and the reconciler require.
  settlementWindowMs: 12000,
};

export interface ChartInputs {
  image: { repository: string; tag: string };
  otlpEndpoint: string;
  logins: DatabaseLogin[];
}

/** `helm template --set` arguments: a development install (rail-stub on) sized for one machine. */
export function chartValues(i: ChartInputs): string[] {
  const set = [
    `image.repository=${i.image.repository}`,
    `image.tag=${i.image.tag}`,
    "image.pullPolicy=Never",
    "railStub.enabled=true",
    // Cleartext between the containers, by the chart's named escape hatch: the image is what this
    // test verifies; the chart's default mode (mutual TLS from its own CA) runs on the test
    // cluster (npm run test:cluster). Token signing stays on, as the chart defaults it.
    "tls.enabled=false",
    "tls.insecureCleartextWithoutIdentities=true",
    // One PostgreSQL process on the host: no failover.
    "database.paydb.durability=single-node",
    `rail.existingSecret=${RAIL_SECRET}`,
    `rail.credentialKey=${CREDENTIAL_KEY}`,
    // The chart's default protocol (http/protobuf) is kept: the receiver decodes it.
    `otel.endpoint=${i.otlpEndpoint}`,
    "otel.environment=smoke",
    "lock.replicas=1",
    "payouts.replicas=1",
    "railProxy.replicas=2",
    "executor.replicas=2",
    `railProxy.railDeadlineMs=${TIMINGS.railDeadlineMs}`,
    `railProxy.ambiguityMarginMs=${TIMINGS.ambiguityMarginMs}`,
    `railProxy.admissionTimeoutMs=${TIMINGS.admissionTimeoutMs}`,
    `railProxy.forwardBudgetMs=${TIMINGS.forwardBudgetMs}`,
    `railProxy.sweepIntervalMs=${TIMINGS.sweepIntervalMs}`,
    `reconciler.settlementWindowMs=${TIMINGS.settlementWindowMs}`,
    "executor.pollIntervalMs=100",
  ];
  // URLs carry neither user nor password: the chart inserts each component's user.
  for (const db of new Set(i.logins.map((l) => l.database))) set.push(`database.${db}.url=postgresql://${POSTGRES_HOST}:5432/${db}?sslmode=disable`);
  for (const l of i.logins) {
    set.push(`${l.chartKey}.user=${l.role}`);
    set.push(`${l.chartKey}.existingSecret=${l.secret}`);
    set.push(`${l.chartKey}.passwordKey=${PASSWORD_KEY}`);
  }
  return set;
}

/**
 * Settings the chart does not make, added by the test. Kept to the minimum and said why:
 * - rail-stub: the rail answers after 600 ms, so a SIGKILLed rail-proxy dies between the intent
 *   commit and the rail's answer (the window the kill drill is about): a `podman kill` takes a few
 *   hundred ms to land, and with the direct unary path little else stretches the call. The stub is a dev-only
 *   component; no production component gets anything here.
 */
export const TEST_ONLY_ENV: Record<string, Record<string, string>> = {
  "rail-stub": { RAIL_STUB_FAULTS: JSON.stringify([{ kind: "LATENCY", latencyMs: 600, count: 0, clientReferencePrefix: "" }]) },
};
