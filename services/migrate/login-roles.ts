/**
 * Login roles for the components. The migrations create one NOLOGIN group role per component
 * with least-privilege grants (migrations/paydb/008_service_roles.sql, lockdb/002); in a
 * deployment each component logs in as a login role that is a member of its group. After
 * migrating a database, the migration job creates or updates those logins:
 *
 * - LOGIN, INHERIT, member of its own group role and of nothing else, so it holds exactly the
 *   group's privileges; never SUPERUSER, CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS;
 * - the password from the component's own file, sent as a SCRAM verifier (scram.ts), never in
 *   clear; without a file the password is left as it is (the server authenticates otherwise);
 * - refused, changing nothing: a login that is the owner (the role migrating), a group role, one
 *   login for two components, an existing role with any of those attributes, with another
 *   membership (another component's group, the owner) or owning objects in the database.
 *
 * Idempotent: a re-run finds the logins and sets their passwords again (a rotation is a re-run).
 * All logins of a database change in one transaction, serialised with other runs.
 */
import pg from "pg";
import { ConfigError } from "../shared/process/config.js";
import { SERVICE_ROLES, type ServiceRole } from "../shared/db/db-roles.js";
import type { DatabaseKind } from "../shared/db/migrate.js";
import { scramSha256Verifier } from "./scram.js";

/** A role name the chart's schema also accepts: an unquoted identifier, so the DBA's SQL names the same role. */
export const LOGIN_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Serialises login provisioning of one database (migrations use 7_007_001). */
const LOGIN_LOCK_KEY = 7_007_002;

/** Attributes a service login must never have: each one reaches past the group's grants. */
const FORBIDDEN_ATTRIBUTES = [
  ["rolsuper", "SUPERUSER"],
  ["rolcreaterole", "CREATEROLE"],
  ["rolcreatedb", "CREATEDB"],
  ["rolreplication", "REPLICATION"],
  ["rolbypassrls", "BYPASSRLS"],
] as const;

export interface LoginSpec {
  component: ServiceRole;
  /** The login role's name. */
  user: string;
  /** Its password; undefined = leave the password as it is. */
  password?: string;
}

export interface LoginResult {
  component: ServiceRole;
  user: string;
  group: string;
  action: "created" | "updated";
  passwordSet: boolean;
}

/** Problems that need no database: names, group roles, the owner, one login for two components. */
export function loginProblems(logins: readonly LoginSpec[], owner?: string): string[] {
  const problems: string[] = [];
  const groups = new Set(Object.values(SERVICE_ROLES).map((r) => r.name));
  const seen = new Map<string, ServiceRole>();
  for (const l of logins) {
    if (!LOGIN_NAME.test(l.user)) problems.push(`${l.component}: login "${l.user}" is not a role name (lower case letters, digits, underscores; at most 63)`);
    if (groups.has(l.user))
      problems.push(`${l.component}: login "${l.user}" is a group role the migrations create; a login must be a role of its own, member of the group`);
    if (owner !== undefined && l.user === owner)
      problems.push(`${l.component}: login "${l.user}" is the owner that runs the migrations; a service must not log in as the owner`);
    const other = seen.get(l.user);
    if (other) problems.push(`${other} and ${l.component} share the login "${l.user}": every component needs a login of its own`);
    else seen.set(l.user, l.component);
  }
  return problems;
}

interface RoleState {
  oid: number;
  rolsuper: boolean;
  rolcreaterole: boolean;
  rolcreatedb: boolean;
  rolreplication: boolean;
  rolbypassrls: boolean;
  member_of: string[];
  owns_objects: boolean;
}

async function roleState(client: pg.ClientBase, name: string): Promise<RoleState | undefined> {
  const { rows } = await client.query<RoleState>(
    `SELECT r.oid, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication, r.rolbypassrls,
            ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                   WHERE m.member = r.oid ORDER BY 1) AS member_of,
            (EXISTS (SELECT 1 FROM pg_database WHERE datname = current_database() AND datdba = r.oid)
             OR EXISTS (SELECT 1 FROM pg_namespace WHERE nspowner = r.oid)
             OR EXISTS (SELECT 1 FROM pg_class WHERE relowner = r.oid)
             OR EXISTS (SELECT 1 FROM pg_proc WHERE proowner = r.oid)) AS owns_objects
       FROM pg_roles r WHERE r.rolname = $1`,
    [name],
  );
  return rows[0];
}

/** What is wrong with an existing role as the login of `group` (empty: fine). */
function existingProblems(component: ServiceRole, user: string, group: string, s: RoleState): string[] {
  const problems: string[] = [];
  const attrs = FORBIDDEN_ATTRIBUTES.filter(([col]) => s[col]).map(([, attr]) => attr);
  if (attrs.length)
    problems.push(
      `${component}: login "${user}" exists with ${attrs.join(", ")}; a service login must not have it (the DBA must remove it or pick another login)`,
    );
  const others = s.member_of.filter((g) => g !== group);
  if (others.length) problems.push(`${component}: login "${user}" is also a member of ${others.join(", ")}; a service login must belong to ${group} only`);
  if (s.owns_objects) problems.push(`${component}: login "${user}" owns objects in this database (or the database); an owner bypasses the grants`);
  return problems;
}

/** Runs one statement, naming the login and the likely cause when PostgreSQL refuses it (never the statement: it holds the verifier). */
async function run(client: pg.ClientBase, sql: string, what: string, hint: string): Promise<void> {
  try {
    await client.query(sql);
  } catch (err) {
    const e = err as { message?: string; code?: string };
    const extra = e.code === "42501" ? ` (${hint})` : "";
    throw new Error(`${what} refused by PostgreSQL: ${e.message ?? String(err)}${extra}`);
  }
}

/**
 * Creates or updates the login role of every component in `logins` on the database at `url`
 * (logged in as its owner). Throws ConfigError, changing nothing, when a login is refused.
 */
export async function provisionLogins(url: string, kind: DatabaseKind, logins: readonly LoginSpec[]): Promise<LoginResult[]> {
  const wrongDb = logins
    .filter((l) => SERVICE_ROLES[l.component].database !== kind)
    .map((l) => `${l.component}: its role lives in ${SERVICE_ROLES[l.component].database}, not ${kind}`);
  const static_ = [...wrongDb, ...loginProblems(logins)];
  if (static_.length) throw new ConfigError(static_);
  if (logins.length === 0) return [];

  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [LOGIN_LOCK_KEY]);
    const {
      rows: [me],
    } = await client.query<{ current: string; session: string; owner: string }>(
      "SELECT current_user::text AS current, session_user::text AS session, pg_get_userbyid(datdba)::text AS owner FROM pg_database WHERE datname = current_database()",
    );

    // Check everything first: a refusal changes nothing.
    const problems: string[] = [];
    const states = new Map<string, RoleState | undefined>();
    for (const l of logins) {
      const group = SERVICE_ROLES[l.component].name;
      if ([me!.current, me!.session, me!.owner].includes(l.user)) {
        problems.push(`${l.component}: login "${l.user}" is the owner of ${kind} or the role running the migrations; a service must not log in as the owner`);
        continue;
      }
      if (!(await roleState(client, group))) {
        problems.push(`${l.component}: group role ${group} does not exist; run the ${kind} migrations first`);
        continue;
      }
      const state = await roleState(client, l.user);
      states.set(l.user, state);
      if (state) problems.push(...existingProblems(l.component, l.user, group, state));
    }
    if (problems.length) throw new ConfigError(problems);

    const results: LoginResult[] = [];
    for (const l of logins) {
      const group = SERVICE_ROLES[l.component].name;
      const role = client.escapeIdentifier(l.user);
      const groupId = client.escapeIdentifier(group);
      const password = l.password === undefined ? "" : ` PASSWORD ${client.escapeLiteral(scramSha256Verifier(l.password))}`;
      const adminHint = `the migration role needs CREATEROLE, and on PostgreSQL 16+ ADMIN OPTION on ${group} and on "${l.user}": it has both when it created them; otherwise GRANT them to it WITH ADMIN OPTION`;
      const state = states.get(l.user);
      if (!state) {
        await run(
          client,
          `CREATE ROLE ${role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT${password} IN ROLE ${groupId}`,
          `creating login "${l.user}" (${l.component})`,
          adminHint,
        );
      } else {
        await run(client, `ALTER ROLE ${role} WITH LOGIN INHERIT${password}`, `updating login "${l.user}" (${l.component})`, adminHint);
        if (!state.member_of.includes(group)) await run(client, `GRANT ${groupId} TO ${role}`, `granting ${group} to "${l.user}"`, adminHint);
      }
      results.push({ component: l.component, user: l.user, group, action: state ? "updated" : "created", passwordSet: l.password !== undefined });
    }

    // What the services will rely on: each login can log in and uses its group's privileges, nothing else.
    for (const l of logins) {
      const group = SERVICE_ROLES[l.component].name;
      const { rows } = await client.query<{ login: boolean; uses_group: boolean }>(
        "SELECT rolcanlogin AS login, pg_has_role(oid, $2::text, 'USAGE') AS uses_group FROM pg_roles WHERE rolname = $1",
        [l.user, group],
      );
      const after = await roleState(client, l.user);
      const wrong = [
        ...(rows[0]?.login ? [] : ["cannot log in"]),
        ...(rows[0]?.uses_group ? [] : [`does not inherit ${group}'s privileges (a membership WITH INHERIT FALSE?)`]),
        ...(after ? existingProblems(l.component, l.user, group, after) : []),
      ];
      if (wrong.length) throw new Error(`login "${l.user}" (${l.component}) after provisioning: ${wrong.join("; ")}`);
    }
    await client.query("COMMIT");
    return results;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    await client.end();
  }
}
