/**
 * Databases as a deployment has them, on the harness's throwaway servers: owned by one owner
 * role that runs the migrations, with every service logging in as its own least-privilege role
 * (services/shared/db/db-roles.ts). The servers use `trust` on 127.0.0.1, so the roles need no
 * passwords here; a deployment gives each component its own credential (docs/deploy.md).
 */
import pg from "pg";
import { OWNER_ROLE, SERVICE_ROLES, type ServiceRole } from "../../services/shared/db/db-roles.js";

/** The same server and database, logged in as `role`. */
export function urlAs(url: string, role: string): string {
  const u = new URL(url);
  u.username = role;
  u.password = "";
  return u.toString();
}

/** Runs fn on a client of the server's `postgres` database (a superuser URL). */
async function withAdmin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const u = new URL(adminUrl);
  u.pathname = "/postgres";
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Roles are per server and test files share one: a concurrent creator wins, we move on. */
async function ignoreDuplicate(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== "42710" && code !== "23505" && code !== "XX000") throw err;
  }
}

/**
 * Creates database `name` (if missing) owned by the owner role, and returns the URL the
 * migrations must run with: the database owner's (a database made by an older harness, owned
 * by the superuser, keeps being migrated by it).
 */
export async function ownedDatabase(adminUrl: string, name: string): Promise<{ url: string; migrateUrl: string }> {
  if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`bad database name ${name}`);
  return withAdmin(adminUrl, async (c) => {
    await ignoreDuplicate(() => c.query(`CREATE ROLE ${OWNER_ROLE} LOGIN CREATEROLE`));
    const existing = await c.query<{ owner: string }>("SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1", [name]);
    if (existing.rowCount === 0) await c.query(`CREATE DATABASE ${name} OWNER ${OWNER_ROLE}`);
    const owner = existing.rows[0]?.owner ?? OWNER_ROLE;
    const u = new URL(adminUrl);
    u.pathname = `/${name}`;
    const url = u.toString();
    return { url, migrateUrl: owner === OWNER_ROLE ? urlAs(url, OWNER_ROLE) : url };
  });
}

/** Lets every service's group role log in (those the migrations applied so far created). */
export async function allowServiceLogins(adminUrl: string): Promise<void> {
  await withAdmin(adminUrl, async (c) => {
    const { rows } = await c.query<{ rolname: string }>("SELECT rolname FROM pg_roles WHERE rolname = ANY($1) AND NOT rolcanlogin", [
      Object.values(SERVICE_ROLES).map((r) => r.name),
    ]);
    for (const { rolname } of rows) await ignoreDuplicate(() => c.query(`ALTER ROLE ${rolname} LOGIN`));
  });
}

/** The URL service `role` logs in with, on the database at `url`. */
export function serviceUrl(url: string, role: ServiceRole): string {
  return urlAs(url, SERVICE_ROLES[role].name);
}
