/**
 * The installation the container smoke test runs, in one place: the Helm values the chart is
 * rendered with, the database logins, the content of every Secret, and the few settings the
 * test adds on top of the chart (each with its reason). Everything else about a container
 * (command, environment, user, mounts, limits, probes) comes from the rendered chart.
 *
 * Database logins: today the chart takes one credential per database (`database.<db>`), so
 * there is one login per database and every component of that database shares it. When the
 * chart takes one credential per component, DATABASE_LOGINS gets one row per component (and
 * an owner row for migrations), and chartValues() maps each row to its chart key: nothing else
 * in the test changes.
 */
import { randomBytes } from "node:crypto";

export const RELEASE = "railfence";
export const NAMESPACE = "railfence-smoke";
/** Network alias of the PostgreSQL container (the database host in every URL). */
export const POSTGRES_HOST = "postgres";

export type Database = "paydb" | "lockdb" | "raildb";

export interface DatabaseLogin {
  /** The chart key whose url/existingSecret/passwordKey this login fills. */
  chartKey: `database.${Database}`;
  database: Database;
  role: string;
  /** The Kubernetes Secret the password lives in (mounted as a file by the chart). */
  secret: string;
  password: string;
}

const password = () => randomBytes(18).toString("base64url");

/** One login per database (see the file comment for the per-component future). */
export function databaseLogins(): DatabaseLogin[] {
  return [
    { chartKey: "database.paydb", database: "paydb", role: "railfence_pay", secret: "smoke-paydb", password: password() },
    { chartKey: "database.lockdb", database: "lockdb", role: "railfence_lock", secret: "smoke-lockdb", password: password() },
    { chartKey: "database.raildb", database: "raildb", role: "railstub", secret: "smoke-raildb", password: password() },
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
  sweepIntervalMs: 500,
  // "Not on the statement" means NOT_PAID only after this: well above deadline + margin + the
  // admission statement's timeout (5 s), which the reconciler is about to require.
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
    `railProxy.sweepIntervalMs=${TIMINGS.sweepIntervalMs}`,
    `reconciler.settlementWindowMs=${TIMINGS.settlementWindowMs}`,
    "executor.pollIntervalMs=100",
  ];
  for (const l of i.logins) {
    set.push(`${l.chartKey}.url=postgresql://${l.role}@${POSTGRES_HOST}:5432/${l.database}?sslmode=disable`);
    set.push(`${l.chartKey}.existingSecret=${l.secret}`);
    set.push(`${l.chartKey}.passwordKey=${PASSWORD_KEY}`);
  }
  return set;
}

/**
 * Settings the chart does not make, added by the test. Kept to the minimum and said why:
 * - rail-stub: the rail answers after 150 ms, so a SIGKILLed rail-proxy dies between the intent
 *   commit and the rail's answer (the window the kill drill is about). The stub is a dev-only
 *   component; no production component gets anything here.
 */
export const TEST_ONLY_ENV: Record<string, Record<string, string>> = {
  "rail-stub": { RAIL_STUB_FAULTS: JSON.stringify([{ kind: "LATENCY", latencyMs: 150, count: 0, clientReferencePrefix: "" }]) },
};
