/**
 * The migration Job's login provisioning, end to end: the Job's containers exactly as the chart
 * renders them (env, and the password files its Secret mounts would hold) run as real processes
 * against a real PostgreSQL that checks passwords. The shared test server trusts 127.0.0.1, so
 * this file starts its own and requires scram-sha-256 from every role but the superuser.
 *
 * Then each component, with the env and the one password file the chart gives its pod, logs in
 * as its own role, which holds exactly its group's privileges (the executor cannot UPDATE
 * rail_high_water; the audit reads the ledger and writes nothing). A rotated password is set by
 * re-running the Job; a shared login, the owner, a group role, a privileged or foreign role as a
 * login are refused, changing nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { databaseUrl } from "../../services/shared/process/config.js";
import { SERVICE_ROLES, type ServiceRole } from "../../services/shared/db/db-roles.js";
import { containerEnv, renderedSecrets, type Secrets } from "../helm/pod-env.js";
import { containers, podSpecs, render } from "../helm/render.js";

const OWNER = "rf_owner";
/** Awkward on purpose: quotes, URL delimiters, a backslash, a non-ASCII letter. */
const PASSWORDS: Record<string, string> = {
  "pg-owner": "owner-pw",
  "pg-rail-proxy": `rp'"pass@word:/?#%é`,
  "pg-executor": "ex \\ pass;--",
  "pg-payouts": "pay$$outs$1",
  "pg-reconciler": "rec-0n-c1ler",
  "pg-auditor": "aud it\"or'1",
  "pg-lock": "l0ck&key=1",
};
const CREDS: Array<{ db: "paydb" | "lockdb"; key: string; component: ServiceRole; secret: string }> = [
  { db: "paydb", key: "railProxy", component: "rail-proxy", secret: "pg-rail-proxy" },
  { db: "paydb", key: "executor", component: "executor", secret: "pg-executor" },
  { db: "paydb", key: "payouts", component: "payouts", secret: "pg-payouts" },
  { db: "paydb", key: "reconciler", component: "reconciler", secret: "pg-reconciler" },
  { db: "paydb", key: "auditor", component: "auditor", secret: "pg-auditor" },
  { db: "lockdb", key: "lock", component: "lock", secret: "pg-lock" },
];
/** The pod (by component label) and the env variables each role's user reads its database from. */
const WORKLOAD: Record<ServiceRole, { pod: string; url: string; file: string }> = {
  "rail-proxy": { pod: "rail-proxy", url: "PAYDB_URL", file: "PAYDB_PASSWORD_FILE" },
  executor: { pod: "executor", url: "PAYDB_URL", file: "PAYDB_PASSWORD_FILE" },
  payouts: { pod: "payouts", url: "PAYDB_URL", file: "PAYDB_PASSWORD_FILE" },
  reconciler: { pod: "reconciler", url: "PAYDB_URL", file: "PAYDB_PASSWORD_FILE" },
  lock: { pod: "lock", url: "LOCKDB_URL", file: "LOCKDB_PASSWORD_FILE" },
  // The daily audit CronJob: `railfence check` reads the CLI's variables.
  auditor: { pod: "audit", url: "RAILFENCE_PAYDB_AUDIT_URL", file: "PAYDB_PASSWORD_FILE" },
};
const loginOf = (c: ServiceRole) => `rf_${c.replace("-", "_")}_login`;

let server: PostgresServer;
let dir: string;
let secrets: Secrets;
let runs = 0;

let rendered: ReturnType<typeof render> | undefined;

/** The chart rendered for this server, with one existing Secret per credential (rendered once). */
function chart(): ReturnType<typeof render> {
  if (rendered) return rendered;
  const set = [`database.paydb.url=postgresql://127.0.0.1:${server.port}/paydb`, `database.lockdb.url=postgresql://127.0.0.1:${server.port}/lockdb`];
  for (const db of ["paydb", "lockdb"])
    set.push(`database.${db}.credentials.migrations.user=${OWNER}`, `database.${db}.credentials.migrations.existingSecret=pg-owner`);
  for (const c of CREDS)
    set.push(`database.${c.db}.credentials.${c.key}.user=${loginOf(c.component)}`, `database.${c.db}.credentials.${c.key}.existingSecret=${c.secret}`);
  rendered = render({ set });
  return rendered;
}

/** The test's Secrets and those the release renders itself (its generated signing key, CA, certificates). */
function withChartSecrets(): Secrets {
  return { ...renderedSecrets(chart()), ...secrets };
}

function secretsNow(): Secrets {
  // rail-proxy's pod also mounts the rail credential.
  return {
    ...Object.fromEntries(Object.entries(PASSWORDS).map(([name, pw]) => [name, { password: pw }])),
    "rf-railfence-rail-credential": { credential: "unused" },
  };
}

/** Runs `node dist/services/migrate/main.js ...args` with env; resolves with its exit code and log lines. */
async function migrateProcess(env: Record<string, string>, args: string[]): Promise<{ code: number | null; lines: string[] }> {
  const p = new ServiceProcess({ service: "migrate", name: `migrate-${++runs}`, env: { ...env, OTEL_SDK_DISABLED: "true" }, args, waitReady: false });
  await p.start();
  const code = await p.waitExit();
  return { code, lines: p.lines };
}

/** Runs the chart's migration Job: its containers in order, each with its rendered env and mounts. */
async function runJob(): Promise<Array<{ container: string; code: number | null; lines: string[] }>> {
  const job = podSpecs(chart()).find((p) => p.component === "migrate")!;
  const base = mkdtempSync(join(dir, "job-"));
  const out = [];
  for (const c of containers(job.spec)) {
    expect(c.command.slice(0, 3)).toEqual(["node", "--max-old-space-size=96", "dist/services/migrate/main.js"]);
    const r = await migrateProcess(containerEnv(job.spec, c, withChartSecrets(), base), c.command.slice(3));
    out.push({ container: c.name, ...r });
    if (r.code !== 0) break;
  }
  return out;
}

/** The URL a component's pod connects with: its rendered env and its own mounted password file. */
function componentUrl(component: ServiceRole): string {
  const w = WORKLOAD[component];
  const pod = podSpecs(chart()).find((p) => p.component === w.pod)!;
  const env = containerEnv(pod.spec, pod.spec.containers[0], withChartSecrets(), mkdtempSync(join(dir, `${component}-`)));
  return databaseUrl(env[w.url]!, env[w.file], w.file);
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** SQLSTATE of connecting (and running sql, rolled back) as url, or "ok". */
async function tryAs(url: string, sql = "SELECT 1"): Promise<string> {
  try {
    return await withClient(url, async (c) => {
      await c.query("BEGIN");
      try {
        await c.query(sql);
        return "ok";
      } finally {
        await c.query("ROLLBACK");
      }
    });
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

const superUrl = (db: string) => server.url(db);
const asSuper = <T>(db: string, fn: (c: pg.Client) => Promise<T>) => withClient(superUrl(db), fn);

/** Everything a role may do in a database: table and column privileges, schema and database ones. */
async function privileges(db: string, role: string): Promise<string[]> {
  return asSuper(db, async (c) => {
    const { rows } = await c.query<{ p: string }>(
      `SELECT format('%s:%s', c.relname, p.priv) AS p
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
              unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE','REFERENCES','TRIGGER']) AS p(priv)
        WHERE n.nspname = 'public' AND c.relkind IN ('r','p','v','m') AND has_table_privilege($1, c.oid, p.priv)
       UNION ALL
       SELECT format('%s.%s:%s', c.relname, a.attname, p.priv)
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped,
              unnest(ARRAY['SELECT','INSERT','UPDATE','REFERENCES']) AS p(priv)
        WHERE n.nspname = 'public' AND c.relkind IN ('r','p') AND has_column_privilege($1, c.oid, a.attnum, p.priv)
       UNION ALL
       SELECT format('schema public:%s', p.priv) FROM unnest(ARRAY['CREATE','USAGE']) p(priv) WHERE has_schema_privilege($1, 'public', p.priv)
       UNION ALL
       SELECT format('database:%s', p.priv) FROM unnest(ARRAY['CREATE','CONNECT','TEMPORARY']) p(priv) WHERE has_database_privilege($1, current_database(), p.priv)
       ORDER BY 1`,
      [role],
    );
    return rows.map((r) => r.p);
  });
}

async function roleFacts(role: string): Promise<{ attrs: string[]; memberOf: string[] } | undefined> {
  return asSuper("postgres", async (c) => {
    const { rows } = await c.query(
      `SELECT ARRAY_REMOVE(ARRAY[CASE WHEN rolsuper THEN 'SUPERUSER' END, CASE WHEN rolcreaterole THEN 'CREATEROLE' END,
                                 CASE WHEN rolcreatedb THEN 'CREATEDB' END, CASE WHEN rolreplication THEN 'REPLICATION' END,
                                 CASE WHEN rolbypassrls THEN 'BYPASSRLS' END, CASE WHEN rolcanlogin THEN 'LOGIN' END], NULL) AS attrs,
              ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid ORDER BY 1) AS "memberOf"
         FROM pg_roles r WHERE rolname = $1`,
      [role],
    );
    return rows[0];
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "railfence-logins-"));
  secrets = secretsNow();
  server = await PostgresServer.start();
  // The superuser stays trusted (this harness administers the server as it); every other role
  // must present its password.
  writeFileSync(
    join(server.dataDir, "pg_hba.conf"),
    ["local all all trust", "host all postgres 127.0.0.1/32 trust", "host all all 127.0.0.1/32 scram-sha-256", ""].join("\n"),
  );
  await asSuper("postgres", async (c) => {
    await c.query("SELECT pg_reload_conf()");
    // The owner as managed PostgreSQL (Cloud SQL, RDS) hands it out: no superuser, CREATEROLE.
    await c.query(`CREATE ROLE ${OWNER} LOGIN CREATEROLE PASSWORD '${PASSWORDS["pg-owner"]}'`);
    await c.query(`CREATE DATABASE paydb OWNER ${OWNER}`);
    await c.query(`CREATE DATABASE lockdb OWNER ${OWNER}`);
  });
  const job = await runJob();
  expect(
    job.map((r) => [r.container, r.code]),
    job.flatMap((r) => r.lines).join("\n"),
  ).toEqual([
    ["migrate-lockdb", 0],
    ["migrate-paydb", 0],
  ]);
}, 180_000);

afterAll(async () => {
  await server?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("migration Job: login provisioning", () => {
  it("the server checks passwords (negative control): a wrong password and the bare group roles are refused", async () => {
    const u = new URL(componentUrl("executor"));
    u.password = "not-the-password";
    expect(await tryAs(u.toString())).toBe("28P01");
    const group = new URL(componentUrl("executor"));
    group.username = SERVICE_ROLES.executor.name;
    expect(await tryAs(group.toString())).toMatch(/^28/); // no password, NOLOGIN: class 28, invalid authorization
  });

  it.each(CREDS.map((c) => [c.component]))("%s logs in with the env and the one password file its pod gets", async (component) => {
    const user = await withClient(componentUrl(component), async (c) => (await c.query<{ u: string }>("SELECT current_user AS u")).rows[0]!.u);
    expect(user).toBe(loginOf(component));
  });

  it.each(CREDS.map((c) => [c.component, c.db]))("%s's login holds exactly its group's privileges, nothing more", async (component, db) => {
    const login = loginOf(component);
    const group = SERVICE_ROLES[component].name;
    const mine = await privileges(db, login);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine).toEqual(await privileges(db, group));
    expect(await roleFacts(login)).toEqual({ attrs: ["LOGIN"], memberOf: [group] });
  });

  it("the privilege comparison can fail (negative control): another group's grants are a different set", async () => {
    expect(await privileges("paydb", SERVICE_ROLES.executor.name)).not.toEqual(await privileges("paydb", SERVICE_ROLES["rail-proxy"].name));
  });

  it("each login is refused what its group is refused: the executor cannot touch the proxy's guards", async () => {
    const executor = componentUrl("executor");
    expect(await tryAs(executor, "SELECT count(*) FROM payouts")).toBe("ok");
    expect(await tryAs(executor, "UPDATE rail_high_water SET mark = 9223372036854775807")).toBe("42501");
    expect(await tryAs(executor, "DELETE FROM rail_submissions")).toBe("42501");
    expect(await tryAs(executor, "ALTER TABLE rail_high_water DISABLE TRIGGER ALL")).toBe("42501");
    const proxy = componentUrl("rail-proxy");
    expect(await tryAs(proxy, "INSERT INTO rail_high_water (account_id, mark) VALUES ('acc-logins', 1)")).toBe("ok");
    expect(await tryAs(proxy, "DELETE FROM rail_submissions")).toBe("42501");
    expect(await tryAs(proxy, "CREATE ROLE sneaky")).toBe("42501");
    expect(await tryAs(componentUrl("lock"), "DELETE FROM locks")).toBe("42501");
    // The audit reads the ledger and joins the statement in temporary tables of its own; it writes nothing.
    const auditor = componentUrl("auditor");
    expect(await tryAs(auditor, "SELECT count(*) FROM rail_submissions JOIN payouts ON payouts.payout_id = rail_submissions.bound_payout_id")).toBe("ok");
    expect(await tryAs(auditor, "CREATE TEMP TABLE audit_probe (x int)")).toBe("ok");
    expect(await tryAs(auditor, "UPDATE payouts SET state = 'PAID'")).toBe("42501");
    expect(await tryAs(auditor, "INSERT INTO rail_high_water (account_id, mark) VALUES ('acc-audit', 1)")).toBe("42501");
    expect(await tryAs(auditor, "UPDATE rail_submissions SET state = 'RESOLVED_PAID'")).toBe("42501");
  });

  it("a re-run with a rotated password sets it, and leaves every other login working", async () => {
    const before = componentUrl("executor");
    PASSWORDS["pg-executor"] = "rotated executor password";
    secrets = secretsNow();
    try {
      const job = await runJob();
      expect(job.map((r) => r.code)).toEqual([0, 0]);
      const events = job
        .flatMap((r) => r.lines)
        .filter((l) => l.includes('"event":"login_provisioned"'))
        .map((l) => JSON.parse(l));
      expect(events.map((e) => [e.component, e.action, e.password]).sort()).toEqual(CREDS.map((c) => [c.component, "updated", "set"]).sort());
      expect(await tryAs(before)).toBe("28P01");
      for (const c of CREDS) expect(await tryAs(componentUrl(c.component)), c.component).toBe("ok");
      // The password never reaches a log line, nor the server as plaintext.
      expect(job.flatMap((r) => r.lines).join("\n")).not.toContain("rotated executor password");
    } finally {
      PASSWORDS["pg-executor"] = "ex \\ pass;--";
      secrets = secretsNow();
      expect((await runJob()).map((r) => r.code)).toEqual([0, 0]);
    }
  });
});

describe("migration Job: refused logins change nothing", () => {
  const paydbEnv = (extra: Record<string, string>) => {
    const file = join(dir, "owner-password");
    writeFileSync(file, PASSWORDS["pg-owner"]!);
    const pw = join(dir, "refused-password");
    writeFileSync(pw, "a-new-password");
    return { env: { DATABASE_URL: `postgresql://${OWNER}@127.0.0.1:${server.port}/paydb`, DATABASE_PASSWORD_FILE: file, ...extra }, pw };
  };

  async function refused(extra: (pw: string) => Record<string, string>, args: string[], message: RegExp): Promise<void> {
    const { env, pw } = paydbEnv({});
    const before = await Promise.all(CREDS.map((c) => tryAs(componentUrl(c.component))));
    const r = await migrateProcess({ ...env, ...extra(pw) }, args);
    expect(r.code, r.lines.join("\n")).toBe(78);
    expect(r.lines.join("\n")).toMatch(message);
    // Every login still logs in with its own password (nothing was altered).
    expect(await Promise.all(CREDS.map((c) => tryAs(componentUrl(c.component))))).toEqual(before);
  }

  it("two components sharing one login: refused before anything is created", async () => {
    await refused(
      (pw) => ({ LOGIN_RAIL_PROXY_USER: "rf_shared", LOGIN_EXECUTOR_USER: "rf_shared", LOGIN_EXECUTOR_PASSWORD_FILE: pw }),
      ["paydb"],
      /rail-proxy and executor share the login \\"rf_shared\\"/,
    );
    expect(await roleFacts("rf_shared")).toBeUndefined();
  });

  it("the owner, or a group role, as a login: refused", async () => {
    await refused((pw) => ({ LOGIN_PAYOUTS_USER: OWNER, LOGIN_PAYOUTS_PASSWORD_FILE: pw }), ["paydb"], /is the owner that runs the migrations/);
    await refused(() => ({ LOGIN_EXECUTOR_USER: SERVICE_ROLES["rail-proxy"].name }), ["paydb"], /is a group role the migrations create/);
    expect(await roleFacts(SERVICE_ROLES["rail-proxy"].name)).toEqual({ attrs: [], memberOf: [] });
  });

  it("one login for components in paydb and lockdb: the second database refuses it (member of the other group)", async () => {
    await refused(
      () => ({ DATABASE_URL: `postgresql://${OWNER}@127.0.0.1:${server.port}/lockdb`, LOGIN_LOCK_USER: loginOf("executor") }),
      ["lockdb"],
      /is also a member of railfence_executor/,
    );
    expect(await roleFacts(loginOf("executor"))).toEqual({ attrs: ["LOGIN"], memberOf: ["railfence_executor"] });
  });

  it("an existing privileged role, or one owning objects, as a login: refused and left as it was", async () => {
    await asSuper("paydb", async (c) => {
      await c.query("CREATE ROLE rf_powerful LOGIN CREATEROLE");
      await c.query("CREATE ROLE rf_table_owner LOGIN");
      await c.query("CREATE TABLE stray (x int)");
      await c.query("ALTER TABLE stray OWNER TO rf_table_owner");
    });
    await refused(() => ({ LOGIN_RECONCILER_USER: "rf_powerful" }), ["paydb"], /exists with CREATEROLE/);
    await refused(() => ({ LOGIN_RECONCILER_USER: "rf_table_owner" }), ["paydb"], /owns objects in this database/);
    expect(await roleFacts("rf_powerful")).toEqual({ attrs: ["CREATEROLE", "LOGIN"], memberOf: [] });
    expect(await roleFacts("rf_table_owner")).toEqual({ attrs: ["LOGIN"], memberOf: [] });
  });

  it("a login the DBA granted a second group is refused on the next run, and then differs from its group (negative control)", async () => {
    await asSuper("postgres", (c) => c.query(`GRANT ${SERVICE_ROLES["rail-proxy"].name} TO ${loginOf("payouts")}`));
    try {
      expect(await privileges("paydb", loginOf("payouts"))).not.toEqual(await privileges("paydb", SERVICE_ROLES.payouts.name));
      const job = await runJob();
      expect(job.at(-1)!.code).toBe(78);
      expect(job.flatMap((r) => r.lines).join("\n")).toMatch(/payouts: login \\"rf_payouts_login\\" is also a member of railfence_rail_proxy/);
    } finally {
      await asSuper("postgres", (c) => c.query(`REVOKE ${SERVICE_ROLES["rail-proxy"].name} FROM ${loginOf("payouts")}`));
    }
  });
});
