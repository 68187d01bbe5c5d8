/**
 * Which login roles the migration job provisions, from the environment the Helm chart sets
 * (migrations.provisionLogins): LOGIN_<COMPONENT>_USER and, optionally,
 * LOGIN_<COMPONENT>_PASSWORD_FILE, for COMPONENT in RAIL_PROXY, EXECUTOR, PAYOUTS, RECONCILER
 * (paydb) and LOCK (lockdb). No LOGIN_* variable: no provisioning (a DBA manages the logins).
 */
import { ConfigError, readSecretFile } from "../shared/process/config.js";
import { SERVICE_ROLES, type ServiceRole } from "../shared/db/db-roles.js";
import type { DatabaseKind } from "../shared/db/migrate.js";
import { loginProblems, type LoginSpec } from "./login-roles.js";

/** LOGIN_RAIL_PROXY for "rail-proxy". */
export function loginEnvPrefix(component: ServiceRole): string {
  return `LOGIN_${component.toUpperCase().replace(/-/g, "_")}`;
}

/**
 * The logins to provision per database, passwords read from their files. Throws ConfigError
 * listing every problem: a password file without a user, a login for a database this run does
 * not migrate, a bad or shared name, the owner (`owner`, the user of DATABASE_URL) as a login.
 */
export function readLogins(e: NodeJS.ProcessEnv, kinds: readonly DatabaseKind[], owner: string | undefined): Map<DatabaseKind, LoginSpec[]> {
  const problems: string[] = [];
  const specs: LoginSpec[] = [];
  for (const component of Object.keys(SERVICE_ROLES) as ServiceRole[]) {
    const prefix = loginEnvPrefix(component);
    const user = e[`${prefix}_USER`];
    const file = e[`${prefix}_PASSWORD_FILE`];
    if (!user) {
      if (file) problems.push(`${prefix}_PASSWORD_FILE is set without ${prefix}_USER`);
      continue;
    }
    const database = SERVICE_ROLES[component].database;
    if (!kinds.includes(database)) {
      problems.push(`${prefix}_USER: ${component} logs in to ${database}, which this run does not migrate`);
      continue;
    }
    let password: string | undefined;
    if (file) {
      try {
        password = readSecretFile(file, `${prefix}_PASSWORD_FILE`);
      } catch (err) {
        problems.push(...(err instanceof ConfigError ? err.problems : [String(err)]));
      }
    }
    specs.push({ component, user, ...(password === undefined ? {} : { password }) });
  }
  problems.push(...loginProblems(specs, owner));
  if (problems.length) throw new ConfigError(problems);
  const byDb = new Map<DatabaseKind, LoginSpec[]>();
  for (const s of specs) {
    const db = SERVICE_ROLES[s.component].database;
    byDb.set(db, [...(byDb.get(db) ?? []), s]);
  }
  return byDb;
}
