/**
 * `migrate paydb` with TOKEN_SIGNING_KEY_FILE installs the lock's token-signing key into paydb,
 * where every new payout fence is then verified with it (migration 014). Run as the real migrate
 * process: installed, a re-run leaves it unchanged, another key replaces it (rotation), and a bad
 * key file is refused before anything changes.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { uniqueSuffix } from "../support/test-mesh.js";

const admin = inject("pgUrl");
const dbName = `paydb_fencekey${uniqueSuffix()}`;
const url = admin.replace(/\/[^/]*$/, `/${dbName}`);
let dir: string;
let runs = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "railfence-fence-key-"));
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${dbName}`);
  await c.end();
});

afterAll(async () => {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await c.end();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function keyFile(name: string, key: string): string {
  const file = join(dir, name);
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return file;
}

async function runMigrate(env: Record<string, string>) {
  const p = new ServiceProcess({
    service: "migrate",
    name: `migrate-key-${++runs}`,
    env: { DATABASE_URL: url, OTEL_SDK_DISABLED: "true", ...env },
    args: ["paydb"],
    waitReady: false,
  });
  await p.start();
  const code = await p.waitExit();
  const events = p.lines.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
  return { code, events, lines: p.lines };
}

async function installedKey(): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ key: Buffer }>("SELECT key FROM fence_signing_key");
    return rows[0]?.key.toString("utf8");
  } finally {
    await c.end();
  }
}

describe("migrate paydb installs the token-signing key paydb verifies fences with", () => {
  it("installs it, leaves it on a re-run, replaces it with another key, and refuses a bad key file changing nothing", async () => {
    const first = "k".repeat(40);
    const run1 = await runMigrate({ TOKEN_SIGNING_KEY_FILE: keyFile("k1", first) });
    expect(run1.code, run1.lines.join("\n")).toBe(0);
    expect(run1.events.find((e) => e.event === "fence_signing_key")).toMatchObject({ action: "installed" });
    expect(await installedKey()).toBe(first);

    const run2 = await runMigrate({ TOKEN_SIGNING_KEY_FILE: keyFile("k1", first) });
    expect(run2.events.find((e) => e.event === "fence_signing_key")).toMatchObject({ action: "unchanged" });

    const second = "r".repeat(48);
    const run3 = await runMigrate({ TOKEN_SIGNING_KEY_FILE: keyFile("k2", second) });
    expect(run3.events.find((e) => e.event === "fence_signing_key")).toMatchObject({ action: "replaced" });
    expect(await installedKey()).toBe(second);

    // Without the variable the installed key stays: switching verification off is an owner's explicit act.
    const run4 = await runMigrate({});
    expect(run4.code).toBe(0);
    expect(run4.events.some((e) => e.event === "fence_signing_key")).toBe(false);
    expect(await installedKey()).toBe(second);

    const short = await runMigrate({ TOKEN_SIGNING_KEY_FILE: keyFile("short", "too-short") });
    expect(short.code).toBe(78);
    expect(short.lines.join("\n")).toContain("TOKEN_SIGNING_KEY_FILE: the key must be at least 32 characters");
    expect(await installedKey()).toBe(second);
  });
});
