/** The migration runner: concurrent runners are safe, history is recorded, edits are refused. */
import { cpSync, mkdtempSync, rmSync, writeFileSync, appendFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it, inject } from "vitest";
import { migrate, migrationFiles } from "../../services/shared/db/migrate.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { uniqueSuffix } from "../support/test-mesh.js";

const admin = inject("pgUrl");
const created: string[] = [];

async function freshDb(): Promise<string> {
  const name = `migtest${uniqueSuffix()}`;
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  created.push(name);
  return admin.replace(/\/[^/]*$/, `/${name}`);
}

afterAll(async () => {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  for (const name of created) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await c.end();
});

describe("migrate", () => {
  it("three runners started at once apply every paydb migration exactly once", async () => {
    const url = await freshDb();
    const results = await Promise.all([migrate(url, "paydb"), migrate(url, "paydb"), migrate(url, "paydb")]);
    const expected = migrationFiles("paydb").map((m) => m.version);
    expect(results.flat().sort()).toEqual(expected);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const { rows } = await c.query("SELECT version FROM schema_migrations ORDER BY version");
    await c.end();
    expect(rows.map((r) => r.version)).toEqual(expected);
    expect(await migrate(url, "paydb")).toEqual([]);
  });

  it("refuses a migration that was edited after it was applied", async () => {
    const url = await freshDb();
    const dir = mkdtempSync(join(tmpdir(), "railfence-mig-"));
    try {
      cpSync(join(projectRoot(), "migrations", "raildb"), dir, { recursive: true });
      await migrate(url, "raildb", dir);
      appendFileSync(join(dir, "001_payments.sql"), "\n-- edited\n");
      await expect(migrate(url, "raildb", dir)).rejects.toThrow(/edited after it was applied/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a failing migration is rolled back whole and not recorded", async () => {
    const url = await freshDb();
    const dir = mkdtempSync(join(tmpdir(), "railfence-mig-"));
    try {
      writeFileSync(join(dir, "001_ok.sql"), "CREATE TABLE t1 (id int);");
      writeFileSync(join(dir, "002_broken.sql"), "CREATE TABLE t2 (id int); SELECT * FROM no_such_table;");
      await expect(migrate(url, "raildb", dir)).rejects.toThrow(/no_such_table/);
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      const versions = (await c.query("SELECT version FROM schema_migrations")).rows.map((r) => r.version);
      const t2 = (await c.query("SELECT to_regclass('t2') AS t")).rows[0].t;
      await c.end();
      expect(versions).toEqual(["001"]);
      expect(t2).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
