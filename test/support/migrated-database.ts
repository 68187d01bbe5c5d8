/**
 * A database of its own for one test file, migrated as `kind`, with a connection as its owner:
 * created in the file's beforeAll, dropped (with its connections) in its afterAll. For tests that
 * run SQL or a store directly, without a mesh.
 *
 *   const db = useMigratedDatabase("paydb_group", "paydb");
 *   it("...", async () => { await db.owner.query(...); createPool({ url: db.url }) ... });
 */
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { migrate, type DatabaseKind } from "../../services/shared/db/migrate.js";
import { uniqueSuffix } from "./test-mesh.js";

export interface MigratedDatabase {
  readonly url: string;
  /** A connection as the database's owner (opened in beforeAll). */
  readonly owner: pg.Client;
}

async function asAdmin(admin: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export function useMigratedDatabase(prefix: string, kind: DatabaseKind): MigratedDatabase {
  const admin = inject("pgUrl");
  const name = `${prefix}${uniqueSuffix()}`;
  const url = admin.replace(/\/[^/]*$/, `/${name}`);
  let owner: pg.Client | undefined;
  beforeAll(async () => {
    await asAdmin(admin, `CREATE DATABASE ${name}`);
    await migrate(url, kind);
    owner = new pg.Client({ connectionString: url });
    await owner.connect();
  });
  afterAll(async () => {
    await owner?.end();
    await asAdmin(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
  return {
    url,
    get owner() {
      if (!owner) throw new Error("useMigratedDatabase: used before the file's beforeAll created it");
      return owner;
    },
  };
}
