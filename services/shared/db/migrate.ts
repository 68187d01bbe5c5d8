/**
 * Migration runner. Applies migrations/<db>/NNN_name.sql in order, each in its own transaction,
 * and records version + checksum in schema_migrations. A session advisory lock makes it safe
 * when several replicas (or a Helm hook and a pod) start at once: the second waits, then finds
 * nothing left to do. An edited, already-applied file is refused (checksum mismatch).
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { projectRoot } from "../process/project-root.js";

export type DatabaseKind = "paydb" | "raildb" | "lockdb";

/** Arbitrary constant: the advisory lock key shared by every migration runner. */
const MIGRATION_LOCK_KEY = 7_007_001;

interface MigrationFile {
  version: string;
  name: string;
  sql: string;
  checksum: string;
}

export function migrationFiles(kind: DatabaseKind, dir = join(projectRoot(), "migrations", kind)): MigrationFile[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => {
      const sql = readFileSync(join(dir, f), "utf8");
      return {
        version: f.slice(0, 3),
        name: f.slice(4, -4),
        sql,
        checksum: createHash("sha256").update(sql).digest("hex"),
      };
    });
}

/** Applies pending migrations; returns the versions applied by this call. */
export async function migrate(url: string, kind: DatabaseKind, dir?: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await client.query<{ version: string; checksum: string }>("SELECT version, checksum FROM schema_migrations");
    const done = new Map(rows.map((r) => [r.version, r.checksum]));
    for (const m of migrationFiles(kind, dir)) {
      const previous = done.get(m.version);
      if (previous !== undefined) {
        if (previous !== m.checksum) throw new Error(`${kind} migration ${m.version}_${m.name} was edited after it was applied`);
        continue;
      }
      await client.query("BEGIN");
      try {
        await client.query(m.sql);
        await client.query("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", [m.version, m.name, m.checksum]);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK");
        throw err;
      }
      applied.push(m.version);
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock_all()").catch(() => {});
    await client.end();
  }
  return applied;
}

/**
 * Refuses to run against a database whose schema is older than this build needs. Services do not
 * migrate (their roles cannot: least privilege); the migration job does, before they start.
 */
export async function requireMigrated(db: { query: pg.Pool["query"] }, kind: DatabaseKind): Promise<void> {
  const files = migrationFiles(kind);
  const needed = files[files.length - 1]?.version;
  if (!needed) return;
  let applied: string | null = null;
  try {
    const { rows } = await db.query<{ v: string | null }>("SELECT max(version) AS v FROM schema_migrations");
    applied = rows[0]?.v ?? null;
  } catch (err) {
    if ((err as { code?: string }).code !== "42P01") throw err;
  }
  if (applied === null || applied < needed) {
    throw new Error(
      `${kind} is at migration ${applied ?? "none"}; this build needs ${needed}: run the migration job (node dist/services/migrate/main.js ${kind})`,
    );
  }
}

/**
 * Installs (or replaces) the token-signing key paydb verifies every new payout fence with
 * (migration 014). Run as the owner, after migrating paydb, with the key the lock service signs
 * with. Replacing it is a key rotation: roll the lock service and rail-proxy to the new key at
 * the same time (fences signed with the old key are refused from then on).
 */
export async function installFenceSigningKey(url: string, key: Buffer): Promise<"installed" | "unchanged" | "replaced"> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ key: Buffer }>("SELECT key FROM fence_signing_key");
    if (rows[0]?.key.equals(key)) return "unchanged";
    await client.query(
      `INSERT INTO fence_signing_key (only_one, key) VALUES (true, $1)
       ON CONFLICT (only_one) DO UPDATE SET key = EXCLUDED.key, installed_at = now()`,
      [key],
    );
    return rows.length ? "replaced" : "installed";
  } finally {
    await client.end();
  }
}
