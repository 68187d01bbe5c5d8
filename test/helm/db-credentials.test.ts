/**
 * One database credential per component: each pod logs in as its own role (the templates insert
 * the user into a URL that carries none) and mounts its own password only; the migration Job logs
 * in as the owner and, with migrations.provisionLogins, alone mounts the logins' passwords to
 * create them. A shared login or Secret key is refused at render time (templates/validate.yaml).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SERVICE_ROLES } from "../../services/shared/db/db-roles.js";
import { fileSource } from "./chart-checks.js";
import { chartDir, helm } from "./helm-tool.js";
import { byKind, containers, podSpecs, render, templateArgs, type K8sObject } from "./render.js";

const MINIMAL = ["rail.url=https://rail.example.com", "rail.existingSecret=rail-cred", "rail.egress.cidrs={203.0.113.0/24}"];
/** Every credential with a Secret of its own, as values-gke.yaml has them. */
const OWN_SECRETS = [
  ...MINIMAL,
  ...["migrations", "railProxy", "executor", "payouts", "reconciler", "auditor"].map(
    (k) => `database.paydb.credentials.${k}.existingSecret=db-paydb-${k.toLowerCase()}`,
  ),
  "database.lockdb.credentials.migrations.existingSecret=db-paydb-migrations",
  "database.lockdb.credentials.lock.existingSecret=db-lockdb-lock",
];

const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).filter((e: any) => "value" in e).map((e: any) => [e.name, e.value]));

/** Secret/key of every database password file each container reads, by component/container. */
function passwordSources(objects: K8sObject[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const p of podSpecs(objects)) {
    for (const c of containers(p.spec)) {
      const files = (c.env ?? []).filter((e: any) => /PASSWORD_FILE$/.test(e.name)).map((e: any) => fileSource(p.spec, c, e.value) ?? `unmounted:${e.value}`);
      out[`${p.component}/${c.name}`] = files.sort();
    }
  }
  return out;
}

function refusal(...set: string[]): { status: number; stderr: string } {
  const r = helm(templateArgs({ set: [...MINIMAL, ...set] }));
  return { status: r.status, stderr: r.stderr };
}

describe("database credentials: one per component", () => {
  const objects = render({ set: OWN_SECRETS });

  it("each component connects as its own user; the migration containers as the owner; no URL holds a password", () => {
    const users: Record<string, string> = {};
    for (const p of podSpecs(objects)) {
      for (const c of containers(p.spec)) {
        for (const [k, v] of Object.entries(envOf(c))) {
          if (!/^postgres(ql)?:\/\//.test(v)) continue;
          const u = new URL(v);
          expect(u.password, `${c.name} ${k}`).toBe("");
          users[`${p.component}/${c.name} ${k}`] = u.username;
        }
      }
    }
    expect(users).toEqual({
      "lock/lock LOCKDB_URL": "railfence_lock_login",
      "rail-proxy/rail-proxy PAYDB_URL": "railfence_rail_proxy_login",
      "payouts/payouts PAYDB_URL": "railfence_payouts_login",
      "executor/executor PAYDB_URL": "railfence_executor_login",
      "reconciler/reconciler PAYDB_URL": "railfence_reconciler_login",
      "audit/audit RAILFENCE_PAYDB_AUDIT_URL": "railfence_auditor_login",
      "migrate/migrate-lockdb DATABASE_URL": "railfence_owner",
      "migrate/migrate-paydb DATABASE_URL": "railfence_owner",
    });
    expect(envOf(containers(podSpecs(objects).find((p) => p.component === "executor")!.spec)[0]).PAYDB_URL).toBe(
      "postgresql://railfence_executor_login@paydb.railfence.svc.cluster.local:5432/paydb?sslmode=require",
    );
  });

  it("each pod mounts its own password only; the migration containers the owner's and their database's logins'", () => {
    expect(passwordSources(objects)).toEqual({
      "lock/lock": ["db-lockdb-lock/password"],
      "rail-proxy/rail-proxy": ["db-paydb-railproxy/password"],
      "payouts/payouts": ["db-paydb-payouts/password"],
      "executor/executor": ["db-paydb-executor/password"],
      "reconciler/reconciler": ["db-paydb-reconciler/password"],
      "audit/audit": ["db-paydb-auditor/password"],
      "migrate/migrate-lockdb": ["db-lockdb-lock/password", "db-paydb-migrations/password"],
      "migrate/migrate-paydb": [
        "db-paydb-auditor/password",
        "db-paydb-executor/password",
        "db-paydb-migrations/password",
        "db-paydb-payouts/password",
        "db-paydb-railproxy/password",
        "db-paydb-reconciler/password",
      ],
    });
    // And nothing else of those Secrets reaches any pod (volumes, not only files read).
    const dbSecrets = new Set(OWN_SECRETS.filter((s) => s.includes("existingSecret=db-")).map((s) => s.split("=")[1]!));
    for (const p of podSpecs(objects)) {
      const mounted = (p.spec.volumes ?? []).map((v: any) => v.secret?.secretName).filter((n: string | undefined) => n && dbSecrets.has(n));
      const read = new Set(Object.entries(passwordSources([p.owner])).flatMap(([, v]) => v.map((s) => s.split("/")[0])));
      expect(
        mounted.every((n: string) => read.has(n)),
        p.component,
      ).toBe(true);
    }
  });

  it("tells the migration containers which logins to create, from the same values", () => {
    const job = podSpecs(objects).find((p) => p.component === "migrate")!;
    const byName = Object.fromEntries(containers(job.spec).map((c: any) => [c.name, envOf(c)]));
    const logins = (env: Record<string, string>) => Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith("LOGIN_")));
    expect(logins(byName["migrate-paydb"]!)).toEqual({
      LOGIN_RAIL_PROXY_USER: "railfence_rail_proxy_login",
      LOGIN_RAIL_PROXY_PASSWORD_FILE: "/var/run/secrets/railfence/paydb-rail-proxy/password",
      LOGIN_EXECUTOR_USER: "railfence_executor_login",
      LOGIN_EXECUTOR_PASSWORD_FILE: "/var/run/secrets/railfence/paydb-executor/password",
      LOGIN_PAYOUTS_USER: "railfence_payouts_login",
      LOGIN_PAYOUTS_PASSWORD_FILE: "/var/run/secrets/railfence/paydb-payouts/password",
      LOGIN_RECONCILER_USER: "railfence_reconciler_login",
      LOGIN_RECONCILER_PASSWORD_FILE: "/var/run/secrets/railfence/paydb-reconciler/password",
      LOGIN_AUDITOR_USER: "railfence_auditor_login",
      LOGIN_AUDITOR_PASSWORD_FILE: "/var/run/secrets/railfence/paydb-auditor/password",
    });
    expect(logins(byName["migrate-lockdb"]!)).toEqual({
      LOGIN_LOCK_USER: "railfence_lock_login",
      LOGIN_LOCK_PASSWORD_FILE: "/var/run/secrets/railfence/lockdb-lock/password",
    });
  });

  it("with migrations.provisionLogins=false the Job creates no login and mounts only the owner's password", () => {
    const off = render({ set: [...OWN_SECRETS, "migrations.provisionLogins=false"] });
    const job = podSpecs(off).find((p) => p.component === "migrate")!;
    for (const c of containers(job.spec))
      expect(
        Object.keys(envOf(c)).filter((k) => k.startsWith("LOGIN_")),
        c.name,
      ).toEqual([]);
    expect(passwordSources(off)["migrate/migrate-paydb"]).toEqual(["db-paydb-migrations/password"]);
    expect(passwordSources(off)["migrate/migrate-lockdb"]).toEqual(["db-paydb-migrations/password"]);
    // One volume per database's owner credential (here both name the same Secret); besides them
    // only the token-signing key (test/helm/token-signing.test.ts).
    expect(job.spec.volumes.filter((v: any) => v.secret && v.name !== "token-signing").map((v: any) => [v.name, v.secret.secretName])).toEqual([
      ["lockdb-migrations-password", "db-paydb-migrations"],
      ["paydb-migrations-password", "db-paydb-migrations"],
    ]);
  });

  it("development passwords become one Secret per credential, holding that password only", () => {
    const dev = render({
      set: [
        ...MINIMAL,
        "database.paydb.credentials.executor.password=ex-pw",
        "database.paydb.credentials.railProxy.password=rp-pw",
        "database.lockdb.credentials.lock.password=lock-pw",
      ],
    });
    const secrets = byKind(dev, "Secret").filter((s) => s.metadata.labels?.["app.kubernetes.io/component"] === "database");
    expect(
      Object.fromEntries(
        secrets.map((s) => [
          s.metadata.name,
          Object.fromEntries(Object.entries(s.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, "base64").toString()])),
        ]),
      ),
    ).toEqual({
      "rf-railfence-paydb-executor-password": { password: "ex-pw" },
      "rf-railfence-paydb-rail-proxy-password": { password: "rp-pw" },
      "rf-railfence-lockdb-lock-password": { password: "lock-pw" },
    });
    const sources = passwordSources(dev);
    expect(sources["executor/executor"]).toEqual(["rf-railfence-paydb-executor-password/password"]);
    expect(sources["rail-proxy/rail-proxy"]).toEqual(["rf-railfence-paydb-rail-proxy-password/password"]);
    expect(sources["payouts/payouts"]).toEqual([]);
  });
});

describe("database credentials: a shared one is refused at render time", () => {
  it.each([
    [
      "two paydb components, one user",
      ["database.paydb.credentials.executor.user=railfence_rail_proxy_login"],
      /database\.paydb\.credentials\.executor and database\.paydb\.credentials\.railProxy both log in as "railfence_rail_proxy_login"/,
    ],
    [
      "a component and the owner",
      ["database.paydb.credentials.payouts.user=railfence_owner"],
      /credentials\.migrations and database\.paydb\.credentials\.payouts both log in as "railfence_owner"/,
    ],
    [
      "lockdb's lock and paydb's owner (roles are per server)",
      ["database.lockdb.credentials.lock.user=railfence_owner"],
      /database\.paydb\.credentials\.migrations and database\.lockdb\.credentials\.lock both log in/,
    ],
    [
      "the dev stub and the executor",
      ["railStub.enabled=true", "database.raildb.user=railfence_executor_login"],
      /database\.paydb\.credentials\.executor and database\.raildb both log in/,
    ],
    [
      "two components, one Secret key",
      ["database.paydb.credentials.executor.existingSecret=db", "database.paydb.credentials.reconciler.existingSecret=db"],
      /credentials\.executor and database\.paydb\.credentials\.reconciler read their password from the same Secret key \(db\/password\)/,
    ],
    [
      "a component and the owner across databases, one Secret key",
      ["database.paydb.credentials.migrations.existingSecret=db", "database.lockdb.credentials.lock.existingSecret=db"],
      /credentials\.migrations and database\.lockdb\.credentials\.lock read their password from the same Secret key/,
    ],
    [
      "a group role as a login",
      ["database.paydb.credentials.executor.user=railfence_executor"],
      /database\.paydb\.credentials\.executor\.user "railfence_executor" is a group role/,
    ],
    ["another component's group role as a login", ["database.paydb.credentials.executor.user=railfence_rail_proxy"], /is a group role the migrations create/],
    ["the superuser for a service", ["database.paydb.credentials.reconciler.user=postgres"], /credentials\.reconciler\.user is "postgres", a superuser/],
    [
      "the auditor and the reconciler, one user",
      ["database.paydb.credentials.auditor.user=railfence_reconciler_login"],
      /database\.paydb\.credentials\.auditor and database\.paydb\.credentials\.reconciler both log in as "railfence_reconciler_login"/,
    ],
    ["the auditor as the owner (it would write everything)", ["database.paydb.credentials.auditor.user=railfence_owner"], /both log in as "railfence_owner"/],
    [
      "the auditor's group role as its login",
      ["database.paydb.credentials.auditor.user=railfence_auditor"],
      /credentials\.auditor\.user "railfence_auditor" is a group role/,
    ],
    [
      "the auditor and the executor, one Secret key",
      ["database.paydb.credentials.auditor.existingSecret=db", "database.paydb.credentials.executor.existingSecret=db"],
      /credentials\.auditor and database\.paydb\.credentials\.executor read their password from the same Secret key/,
    ],
    [
      "the rail credential's Secret as a password Secret",
      ["database.paydb.credentials.executor.existingSecret=rail-cred"],
      /existingSecret "rail-cred" is the rail credential's or the token-signing key's Secret/,
    ],
  ])("%s", (_, set, message) => {
    const r = refusal(...set);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).toContain("validate.yaml");
  });

  it("knows the same group roles as the services (SERVICE_ROLES)", () => {
    const text = readFileSync(join(chartDir, "templates", "validate.yaml"), "utf8");
    const list = /\$groups := list ((?:"[a-z_]+" ?)+)/.exec(text)![1]!;
    expect([...list.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]).sort()).toEqual(
      Object.values(SERVICE_ROLES)
        .map((r) => r.name)
        .sort(),
    );
  });

  it.each([
    [
      "one owner for paydb and lockdb, one Secret",
      ["database.paydb.credentials.migrations.existingSecret=owner", "database.lockdb.credentials.migrations.existingSecret=owner"],
    ],
    [
      "one Secret, a key per component",
      [
        "database.paydb.credentials.executor.existingSecret=db",
        "database.paydb.credentials.executor.passwordKey=executor",
        "database.paydb.credentials.payouts.existingSecret=db",
        "database.paydb.credentials.payouts.passwordKey=payouts",
      ],
    ],
    ["the stub's user unused while the stub is off", ["database.raildb.user=railfence_executor_login"]],
    ["postgres as the owner", ["database.paydb.credentials.migrations.user=postgres", "database.lockdb.credentials.migrations.user=postgres"]],
  ])("accepts what is not shared (negative control): %s", (_, set) => {
    const r = refusal(...set);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });
});
