/**
 * `npm run test:cluster`: the chart on a real one-node Kubernetes cluster built from source.
 *
 *   1. deploy/cluster/up.sh builds (or reuses) and starts the cluster;
 *   2. the railfence image is built (deploy/image/build.sh) and imported into containerd;
 *   3. PostgreSQL and an OTLP receiver start on the node; the namespace enforces Pod Security
 *      "restricted"; `helm install` with the cluster's values profile (profile.ts);
 *   4. checks: every pod Ready through its gRPC probes; a payout through the payouts Service
 *      reaches PAID and its trace reaches the receiver; NetworkPolicy objects select the right
 *      pods; every component logs in to PostgreSQL as its own login; deploy/drills/replica-kill.sh;
 *      the reconciler, then the release's audit (`railfence check`, a Job from its CronJob) with
 *      zero violations, and a planted double payment it must catch; a rolling upgrade under load;
 *      kubectl drain against the rail-proxy PodDisruptionBudget;
 *   5. everything is torn down (CLUSTER_KEEP=1 leaves the cluster and the release running).
 *
 * Needs root. Exit 0 only when every check passed. The report goes to reports/cluster/.
 */
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";
import { formatTable, runAudit, type AuditResult, type Violation } from "../../services/cli/audit/audit.js";
import { SERVICE_ROLES } from "../../services/shared/db/db-roles.js";
import { PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { chartDir } from "../helm/helm-tool.js";
import { OtlpReceiver } from "../observability/otlp-receiver.js";
import { auditJobPatch } from "./audit-job.js";
import { buildAndImportImage, type ImageRef } from "./image.js";
import { Kube, PodWatcher, clusterDir, clusterState, podReady, readClusterInfo, root, runScript, sleep, until, type KubeList, type Pod } from "./kube.js";
import { HostLoad, SwitchingLoad, payoutsClient, waitSettled } from "./load.js";
import { ledgerStatement } from "../../tools/harness/invariants.js";
import { LOGINS, NAMESPACE, RELEASE, prepareNamespace, startDatabases, valuesProfile, writeProfile, type Databases } from "./profile.js";
import { Report } from "./report.js";
import { checkEnforcement, checkNetworkPolicies } from "./network-policies.js";
import { checkAuthorization } from "./authorization.js";
import { clientSecret, issueClientCertificate, type ClientTlsFiles } from "./client-tls.js";

const log = (line: string) => console.log(`[test:cluster ${new Date().toISOString().slice(11, 19)}] ${line}`);
const report = new Report(log);
const keep = process.env.CLUSTER_KEEP === "1";
// For working on one check: CLUSTER_SKIP=drill,upgrade,drain leaves those out (the report says so).
const skip = new Set((process.env.CLUSTER_SKIP ?? "").split(",").filter(Boolean));
const SEL = `app.kubernetes.io/instance=${RELEASE}`;
const component = (c: string) => `${SEL},app.kubernetes.io/component=${c}`;
const work = mkdtempSync(join(tmpdir(), "railfence-cluster-"));
// The audits cover everything this run creates (paydb's clock and ours may differ a little).
const auditSince = `${new Date(Date.now() - 10 * 60_000).toISOString().slice(0, 19)}Z`;

let kube: Kube | undefined;
let dbs: Databases | undefined;
let receiver: OtlpReceiver | undefined;
/** The API client certificate (identity client) the node's clients present to payouts. */
let clientTls: ClientTlsFiles | undefined;
const CLIENT_TLS_SECRET = `${RELEASE}-client-tls`;

function stepsSince(file: string, offset: number): string {
  if (!existsSync(file)) return "";
  const rows = readFileSync(file, "utf8").slice(offset).trim().split("\n").filter(Boolean);
  return rows
    .map((r) => r.split("\t"))
    .map(([, name, secs, extra]) => `| ${name} | ${secs} s | ${extra ?? ""} |`)
    .join("\n");
}

async function main(): Promise<void> {
  // ---- the cluster ----
  const stepsFile = join(clusterState(), "steps.tsv");
  const stepsOffset = existsSync(stepsFile) ? readFileSync(stepsFile, "utf8").length : 0;
  await report.step("cluster up (build or reuse)", async () => {
    const r = await runScript(join(clusterDir, "up.sh"), [], {}, (l) => log(`  ${l}`));
    if (r.status !== 0) throw new Error(`deploy/cluster/up.sh exited ${r.status}`);
  });
  const info = readClusterInfo();
  kube = new Kube(info);
  const k = kube;
  report.section("Cluster steps (time and disk, this run)", `| step | time | observed |\n|---|---|---|\n${stepsSince(stepsFile, stepsOffset)}`);
  const version = JSON.parse(k.must(["version", "-o", "json"])) as { serverVersion: { gitVersion: string } };
  // A reused cluster may still hold the release of a kept run (CLUSTER_KEEP=1): start clean.
  if (k.kubectl(["get", "ns", NAMESPACE]).status === 0) {
    await report.step("remove the previous run's release", () => {
      k.helm(["uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "3m"]);
      k.must(["delete", "ns", NAMESPACE, "--wait=true", "--timeout=180s"]);
    });
  }

  // ---- the image ----
  const image: ImageRef = await report.step(
    "image built and imported into containerd",
    () => buildAndImportImage(info, log),
    (i) => `${i.repository}:${i.tag} (+ ${i.upgradeTag} for the upgrade), ${i.sizeMb} MB archive`,
  );

  // ---- PostgreSQL, OTLP receiver, namespace ----
  dbs = await report.step(
    "PostgreSQL on the node",
    () => startDatabases(info, log),
    (d) =>
      `${info.nodeIp}:${d.server.port}, scram-sha-256 from ${info.podCidr}; made before the install: ${[...new Set(LOGINS.filter((l) => l.createdBy === "dba").map((l) => l.role))].join(", ")}; ${LOGINS.filter((l) => l.createdBy === "job").length} component logins left to the migration Job`,
  );
  const databases = dbs;
  receiver = await new OtlpReceiver().start(info.nodeIp);
  const otlp = receiver;
  await report.step(
    "namespace with Pod Security restricted (enforce)",
    () => {
      prepareNamespace(k, databases);
      return podSecurityControls(k, image);
    },
    (v) => v,
  );

  // ---- helm install ----
  const values = valuesProfile({ imageRepository: image.repository, imageTag: image.tag, otlpEndpoint: otlp.endpoint, info, dbs: databases });
  const profile = writeProfile(work, "values-cluster.json", values);
  await report.step(
    "helm install",
    () => {
      k.mustHelm(["install", RELEASE, chartDir, "-n", NAMESPACE, "-f", profile, "--wait", "--timeout", "10m"]);
      return k.mustHelm(["status", RELEASE, "-n", NAMESPACE, "-o", "json"]);
    },
    (s) => `release ${(JSON.parse(s) as { info: { status: string } }).info.status}, server ${version.serverVersion.gitVersion}`,
  );

  await report.step(
    "every pod Ready through its probes, under mutual TLS",
    () => everyPodReady(k),
    (v) => v,
  );
  report.section("Mode", securityMode(k));
  // An API client's certificate, issued from the release's CA as an operator would (identity client).
  clientTls = issueClientCertificate(k, NAMESPACE, `${RELEASE}-tls-ca`, "client", `${RELEASE}-payouts`, work);
  clientSecret(k, NAMESPACE, CLIENT_TLS_SECRET, clientTls);

  const payoutsIp = k.must(["-n", NAMESPACE, "get", "svc", `${RELEASE}-payouts`, "-o", "jsonpath={.spec.clusterIP}"]).trim();
  const payoutsUrl = `https://${payoutsIp}:7400`;
  // Sessions are sampled while the first payout goes through every component (pools close idle
  // connections, so a single look could miss a component that is not busy at that moment).
  const sessions = new SessionSampler(databases, info.podCidr).start();
  await report.step(
    "a payout through the payouts Service reaches PAID; its trace reaches the receiver",
    () => payoutAndTrace(payoutsUrl, otlp),
    (v) => v,
  );
  await report.step(
    "every component logs in as its own login, made by the migration Job",
    () => componentLogins(databases, sessions),
    (v) => v,
  );

  await report.step(
    "NetworkPolicy objects select the right pods",
    () => checkNetworkPolicies(k, NAMESPACE, RELEASE, info),
    (v) => v,
  );
  const authz = await report
    .step(
      "authorization under mutual TLS: another component's identity refused SubmitPayout, no certificate no session",
      () => checkAuthorization(k, NAMESPACE, RELEASE, image),
      (a) => a.summary,
    )
    .catch(() => undefined);
  if (authz)
    report.section(
      "Identities tried against rail-proxy SubmitPayout",
      ["| caller | certificate Secret | outcome |", "|---|---|---|", ...authz.attempts.map((a) => `| ${a.as} | ${a.secret ?? "-"} | ${a.outcome} |`)].join(
        "\n",
      ),
    );
  const enforcement = await report
    .step(
      "NetworkPolicy enforced by kube-router's policy controller, with its negative control",
      () => checkEnforcement(k, NAMESPACE, RELEASE, image),
      (e) => e.summary,
    )
    .catch(() => undefined);
  if (enforcement)
    report.section(
      "NetworkPolicy: connections tried",
      [
        "Enforced by kube-router's policy controller (built from its Go module, iptables + ipset on the node). Probe pods are judged by their labels; a TCP connection that times out or is refused counts as BLOCKED.",
        "",
        "| phase | from (labels) | to | expected | observed |",
        "|---|---|---|---|---|",
        ...enforcement.rows.map((r) => `| ${r.phase} | ${r.from} | ${r.to} | ${r.want} | ${r.got} |`),
      ].join("\n"),
    );
  await report
    .step(
      "the executor's login cannot read paydb tables it has no grant for",
      () => executorGrants(databases),
      (v) => v,
    )
    .catch(() => undefined);

  // ---- drills ----
  if (skip.size) report.section("Skipped", `CLUSTER_SKIP=${[...skip].join(",")}: this run is not a full test.`);
  // The drills are independent: a failed one is recorded (the run fails) and the next still runs,
  // so one finding does not hide what the others would have shown.
  if (!skip.has("drill")) await drillSteps(k, image, databases).catch(() => {});
  if (!skip.has("upgrade")) {
    const upgrade = await report
      .step(
        "rolling upgrade under load (helm upgrade, new image tag)",
        () => rollingUpgrade(k, profile, image, payoutsUrl, databases),
        (u) => u.summary,
      )
      .catch(() => undefined);
    if (upgrade) report.section("Rolling upgrade", upgrade.details);
  }
  if (!skip.has("drain")) {
    const drain = await report
      .step(
        "kubectl drain respects the rail-proxy PDB",
        () => drainAgainstPdb(k, info.node),
        (d) => d.summary,
      )
      .catch(() => undefined);
    if (drain) report.section("Drain", drain.details);
  }
  if (!skip.has("cleartext-upgrade")) {
    const up = await report
      .step(
        "upgrade from the old cleartext defaults to the secure defaults under load",
        () => cleartextUpgrade(k, profile, image, payoutsIp, databases),
        (u) => u.summary,
      )
      .catch(() => undefined);
    if (up) report.section("Upgrade from cleartext", up.details);
  }
  if (unreachableAudits.length)
    report.section(
      "Audit Jobs that could not reach rail-proxy",
      `${unreachableAudits.join(", ")}: exit 3 ("cannot reach https://${RELEASE}-rail-proxy:7200"), each run once more. A fresh pod under enforced NetworkPolicy can call before the policy controller has admitted its address; the release's own CronJob run would fail the same way and page (RailfenceAuditFailed).`,
    );
  if (skip.size) report.failed = true;
}

/**
 * A release on the old defaults (cleartext h2c, unsigned tokens, no key in paydb: what the chart
 * rendered before December 2026, here with the explicit escape hatches) is upgraded to the
 * chart's defaults while clients create payouts, each switching transport when its attempt fails
 * and retrying with its key. Every intent must get exactly one payout and the audit must pass.
 */
async function cleartextUpgrade(k: Kube, profile: string, image: ImageRef, payoutsIp: string, d: Databases) {
  const insecure = [
    "tls.enabled=false",
    "tls.insecureCleartextWithoutIdentities=true",
    "tokenSigning.enabled=false",
    "tokenSigning.insecureAcceptForgedTokens=true",
  ];
  // The old state: paydb held no signing key (the owner's deliberate DELETE, docs/security.md).
  const owner = new pg.Client({ connectionString: d.nodeUrl("paydb", LOGINS.find((l) => l.component === "migrate")!.role) });
  await owner.connect();
  await owner.query("DELETE FROM fence_signing_key").finally(() => owner.end());
  k.mustHelm([
    "upgrade",
    RELEASE,
    chartDir,
    "-n",
    NAMESPACE,
    "-f",
    profile,
    "--set",
    `image.tag=${image.upgradeTag}`,
    "--set",
    insecure.join(","),
    "--wait",
    "--timeout",
    "10m",
  ]);
  const runId = `clr${Date.now().toString(36)}`;
  const t0 = new Date();
  const load = new SwitchingLoad(`http://${payoutsIp}:7400`, `https://${payoutsIp}:7400`, runId, {
    concurrency: 4,
    accounts: 10,
    pauseMs: 100,
  }).start();
  await sleep(5000);
  const u0 = Date.now();
  // The upgrade makes the CA: the client's certificate (identity default) is issued from it as
  // soon as it exists, and the load tries TLS whenever cleartext fails.
  let tlsAsDefault: ReturnType<typeof issueClientCertificate> | undefined;
  let upgrading = true;
  const issuing = (async () => {
    while (upgrading && !tlsAsDefault) {
      if (k.kubectl(["-n", NAMESPACE, "get", "secret", `${RELEASE}-tls-ca`]).status === 0) {
        tlsAsDefault = issueClientCertificate(k, NAMESPACE, `${RELEASE}-tls-ca`, "default", `${RELEASE}-payouts`, work);
        load.enableTls(tlsAsDefault);
      } else await sleep(500);
    }
  })();
  const up = await k.helmAsync([
    "upgrade",
    RELEASE,
    chartDir,
    "-n",
    NAMESPACE,
    "-f",
    profile,
    "--set",
    `image.tag=${image.tag}`,
    // The migrating clients' identity (payouts.defaultClientId) keeps their keys' scope.
    "--set",
    "tls.payoutsClientIdentities={client,operator,default}",
    "--wait",
    "--timeout",
    "10m",
  ]);
  const u1 = Date.now();
  upgrading = false;
  await issuing;
  await sleep(5000);
  await load.stop();
  if (!tlsAsDefault) throw new Error("the upgrade made no CA to issue the client's certificate from");
  if (up.status !== 0) throw new Error(`helm upgrade to the secure defaults failed: ${up.stderr}`);
  securityMode(k);
  const during = load.intents.filter((i) => i.createdAt && i.createdAt >= u0 && i.createdAt <= u1).length;
  if (during < 10) throw new Error(`only ${during} payouts were created while the upgrade ran`);
  const lost = load.intents.filter((i) => !i.payoutId);
  if (lost.length)
    throw new Error(
      `${lost.length} intents never got a payout: ${lost
        .slice(0, 3)
        .map((i) => `${i.clientReference} ${i.errors.slice(-1)[0]}`)
        .join("; ")}`,
    );
  const dup = await query<{ client_reference: string; n: number }>(
    d,
    "paydb",
    "SELECT client_reference, count(*)::int AS n FROM payouts WHERE client_reference LIKE $1 GROUP BY client_reference HAVING count(*) <> 1",
    [`${runId}-%`],
  );
  if (dup.length) throw new Error(`client references with more than one payout: ${dup.map((x) => x.client_reference).join(", ")}`);
  const states = await waitSettled(
    `https://${payoutsIp}:7400`,
    load.intents.map((i) => i.payoutId!),
    180_000,
    tlsAsDefault,
  );
  const unsettled = load.intents.filter((i) => ![PayoutState.PAID, PayoutState.FAILED, PayoutState.UNKNOWN].includes(states.get(i.payoutId!)!));
  if (unsettled.length) throw new Error(`${unsettled.length} payouts not settled after the upgrade`);
  const checked = await reconcileAndCheck(k, d, "cleartext-upgrade", `${new Date(t0.getTime() - 60_000).toISOString().slice(0, 19)}Z`);
  const switched = load.intents.filter((i) => new Set(i.modes).size > 1).length;
  const lastMode = (m: string) => load.intents.filter((i) => i.modes.at(-1) === m).length;
  const paid = load.intents.filter((i) => states.get(i.payoutId!) === PayoutState.PAID).length;
  const summary = `cleartext + unsigned -> mutual TLS + signed in ${((u1 - u0) / 1000).toFixed(0)} s under load: ${load.intents.length} payouts (${during} during the rollout; ${lastMode("cleartext")} created over cleartext, ${lastMode("tls")} over TLS, ${switched} retried across the switch), none lost, none doubled, ${paid} PAID; audit ${checked.violations} violations`;
  const details = [
    `The release was first moved to the old defaults (\`${insecure.join(" ")}\`, the signing key deleted from paydb), then \`helm upgrade\` to the chart's defaults ran while 4 clients created payouts, each switching transport on a failed attempt and retrying with its Idempotency-Key under the certificate identity \`default\`.`,
    "",
    `- ${load.intents.length} payouts, ${during} while the rollout ran; ${switched} intents were retried across the switch; every intent got exactly one payout`,
    `- settled: ${paid} PAID, ${load.intents.length - paid} other before reconciliation`,
    "",
    checked.details,
  ].join("\n");
  return { summary, details };
}

async function drillSteps(k: Kube, image: ImageRef, databases: Databases): Promise<void> {
  // A failed drill step is recorded; the reconciler, the audit and its negative control still run.
  const drill = await report
    .step(
      "replica-kill drill (deploy/drills/replica-kill.sh)",
      () => replicaKillDrill(k, image, databases),
      (d) =>
        `${d.kills.length} kills (${d.kills.filter((x) => x.mode === "sigkill").length} SIGKILL, ${d.kills.filter((x) => x.mode === "force-delete").length} force-delete), ${d.ambiguous} submissions left ambiguous by killed pods; the script's audit Job: ${d.audit.verdict}, ${d.audit.violations.length} violations, ${d.audit.counts.ambiguousUnresolved} ambiguous listed for the reconciler`,
    )
    .catch(() => undefined);
  const afterDrill = await report
    .step(
      "reconciler, then the release's audit (railfence check) after the drill",
      () => reconcileAndCheck(k, databases, "drill", auditSince),
      (r) => r.summary,
    )
    .catch((err: unknown) => ({ details: `Reconciler and audit after the drill: FAILED, ${(err as Error).message}` }));
  const control = await report
    .step(
      "the audit catches a planted double payment (negative control)",
      () => auditNegativeControl(k, databases),
      (v) => v,
    )
    .catch((err: unknown) => `FAILED, ${(err as Error).message}`);
  const closed = await ambiguityTable(databases);
  report.section(
    "Replica-kill drill",
    [
      "Kills, in order (`force-delete`: `kubectl delete --grace-period=0 --force`; `sigkill`: the rail-proxy container SIGKILLed through the node's containerd, restarted in place by the kubelet):",
      "",
      ...(drill?.kills ?? []).map((kk, i) => `${i + 1}. ${kk.at} \`${kk.pod}\` ${kk.mode}`),
      "",
      `Submissions left ambiguous (the replica died mid-call), and how the reconciler closed them against the rail's statement:`,
      "",
      closed,
      "",
      "Load job:",
      "```",
      drill?.loadSummary ?? "(the drill step failed: see its row and the log)",
      "```",
      drill
        ? `The drill's own verdict (a Job from the audit CronJob, \`railfence check --since <drill start> --quiescent --json\`, before the reconciler): exit 0, ${drill.audit.verdict}; counts ${JSON.stringify(drill.audit.counts)}`
        : "The drill's own verdict: see the drill's row.",
      "",
      afterDrill.details,
      "",
      `Negative control: ${control}`,
    ].join("\n"),
  );
}

/** The report `railfence check --json` prints (the CLI's JSON: verdict plus the audit result). */
interface AuditReport extends AuditResult {
  verdict: "PASS" | "FAIL";
}

/** The `railfence check --json` report in a log that may hold other lines (the script's, stderr's) around it. */
function parseAuditReport(text: string): AuditReport | undefined {
  const lines = text.split("\n");
  for (let i = lines.length - 1; i >= 0; i--) {
    if (!lines[i]!.startsWith("{")) continue;
    for (let j = i; j < lines.length; j++) {
      if (!lines[j]!.startsWith("}")) continue;
      try {
        const parsed = JSON.parse(lines.slice(i, j + 1).join("\n")) as Partial<AuditReport>;
        if (parsed.verdict && parsed.counts) return parsed as AuditReport;
      } catch {
        // not this span
      }
    }
  }
  return undefined;
}

/**
 * Audit Jobs whose pod could not reach rail-proxy at all (exit 3, "cannot reach"): under enforced
 * NetworkPolicy a fresh pod may call before the policy controller has admitted its address. Such
 * a run read nothing and is not a verdict; it is run once more and counted in the report.
 */
const unreachableAudits: string[] = [];

/**
 * One run of the release's audit, exactly as the drill makes it: a Job from the audit CronJob
 * (the image's `railfence check`, the auditor's login and its Secret, the statement through the
 * rail-proxy Service), over this run's window, --quiescent. Returns its exit code and report;
 * a run that could not reach rail-proxy at all is run once more (unreachableAudits).
 */
async function auditJob(k: Kube, name: string, since = auditSince): Promise<{ code: number; report: AuditReport | undefined; log: string }> {
  const first = await auditJobOnce(k, name, since);
  if (first.code !== 3 || !/cannot reach/.test(first.log)) return first;
  unreachableAudits.push(name);
  log(`   audit Job audit-${name} could not reach rail-proxy (exit 3): once more`);
  return auditJobOnce(k, `${name}-again`, since);
}

async function auditJobOnce(k: Kube, name: string, since: string): Promise<{ code: number; report: AuditReport | undefined; log: string }> {
  const job = `audit-${name}`;
  const spec = k.must(["-n", NAMESPACE, "create", "job", job, `--from=cronjob/${RELEASE}-audit`, "--dry-run=client", "-o", "json"]);
  const command = (JSON.parse(spec) as { spec: { template: { spec: { containers: Array<{ command: string[] }> } } } }).spec.template.spec.containers[0]!
    .command;
  const patched = k.must(["-n", NAMESPACE, "patch", "--local", "-f", "-", "--type=json", "-p", auditJobPatch(command, since, job), "-o", "json"], spec);
  k.must(["-n", NAMESPACE, "create", "-f", "-"], patched);
  const exitCode = () =>
    k
      .kubectl(["-n", NAMESPACE, "get", "pods", "-l", `job-name=${job}`, "-o", "jsonpath={.items[0].status.containerStatuses[0].state.terminated.exitCode}"])
      .stdout.trim();
  const code = await until(() => exitCode() || undefined, `audit Job ${job} finished`, 600_000, 2000);
  const out = k.kubectl(["-n", NAMESPACE, "logs", `job/${job}`]).stdout;
  return { code: Number(code), report: parseAuditReport(out), log: out };
}

/**
 * The same audit on the node over the rail's OWN ledger (raildb, which only a test may read),
 * as the auditor's login: a statement that left payments out would show as a difference.
 */
async function hostAudit(d: Databases, since?: string): Promise<AuditResult> {
  const paydb = new pg.Pool({ connectionString: d.nodeUrl("paydb", LOGINS.find((l) => l.component === "audit")!.role), max: 1 });
  const raildb = new pg.Pool({ connectionString: d.nodeUrl("raildb"), max: 1 });
  paydb.on("error", () => {});
  raildb.on("error", () => {});
  try {
    return await runAudit(paydb, ledgerStatement(raildb), { quiescent: true, ...(since ? { since: new Date(since) } : {}) });
  } finally {
    await paydb.end();
    await raildb.end();
  }
}

const violationLines = (vs: Violation[]) =>
  vs
    .slice(0, 5)
    .map((v) => v.detail)
    .join("; ");

/** Which logins the pod network has sessions of, on which database: sampled every 200 ms. */
class SessionSampler {
  readonly seen = new Map<string, number>();
  private stopped = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly d: Databases,
    private readonly podCidr: string,
  ) {}

  start(): this {
    this.loop = (async () => {
      while (!this.stopped) {
        const rows = await query<{ usename: string; datname: string; n: number }>(
          this.d,
          "paydb",
          // A connection still authenticating has no user yet: not a session of anyone.
          "SELECT usename, datname, count(*)::int AS n FROM pg_stat_activity WHERE client_addr <<= $1::inet AND usename IS NOT NULL GROUP BY 1, 2",
          [this.podCidr],
        ).catch(() => []);
        for (const r of rows) this.seen.set(`${r.usename}@${r.datname}`, Math.max(this.seen.get(`${r.usename}@${r.datname}`) ?? 0, r.n));
        await sleep(200);
      }
    })();
    return this;
  }

  /** Samples until every key in `wanted` was seen (or timeoutMs), then stops. */
  async stop(wanted: string[], timeoutMs: number): Promise<Map<string, number>> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && !wanted.every((w) => this.seen.has(w))) await sleep(200);
    this.stopped = true;
    await this.loop;
    return this.seen;
  }
}

/**
 * Every long-running component connects to its database as the login the profile gives it
 * (created by the chart's migration Job, with the password from that component's Secret), and
 * nothing from the pod network connects as the owner, a superuser or anyone else. Each login is
 * LOGIN, neither superuser nor CREATEROLE, and a member of exactly its group role.
 */
async function componentLogins(d: Databases, sampler: SessionSampler): Promise<string> {
  const problems: string[] = [];
  const key = (l: { role: string; database: string }) => `${l.role}@${l.database}`;
  const running = LOGINS.filter((l) => !["migrate", "reconciler", "audit"].includes(l.component));
  // The reconciler's and the audit's CronJob pods may run meanwhile: as themselves, that is fine.
  const allowed = new Set(LOGINS.filter((l) => l.component !== "migrate").map(key));
  const seen = await sampler.stop(running.map(key), 60_000);
  for (const l of running) if (!seen.has(key(l))) problems.push(`no session of ${l.component} as ${l.role} on ${l.database}`);
  for (const k of seen.keys()) if (!allowed.has(k)) problems.push(`unexpected session ${k}`);
  const jobLogins = LOGINS.filter((l) => l.createdBy === "job");
  const roles = await query<{ rolname: string; rolcanlogin: boolean; rolsuper: boolean; rolcreaterole: boolean; groups: string[] }>(
    d,
    "paydb",
    `SELECT r.rolname, r.rolcanlogin, r.rolsuper, r.rolcreaterole, array_remove(array_agg(g.rolname::text ORDER BY g.rolname), NULL) AS groups
       FROM pg_roles r LEFT JOIN pg_auth_members m ON m.member = r.oid LEFT JOIN pg_roles g ON g.oid = m.roleid
      WHERE r.rolname = ANY($1) GROUP BY 1, 2, 3, 4`,
    [jobLogins.map((l) => l.role)],
  );
  const groupOf: Record<string, string> = {
    "rail-proxy": SERVICE_ROLES["rail-proxy"].name,
    executor: SERVICE_ROLES.executor.name,
    payouts: SERVICE_ROLES.payouts.name,
    reconciler: SERVICE_ROLES.reconciler.name,
    audit: SERVICE_ROLES.auditor.name,
    lock: SERVICE_ROLES.lock.name,
  };
  for (const l of jobLogins) {
    const r = roles.find((x) => x.rolname === l.role);
    if (!r) problems.push(`login ${l.role} was not created`);
    else if (!r.rolcanlogin || r.rolsuper || r.rolcreaterole || r.groups.join() !== groupOf[l.component])
      problems.push(
        `login ${l.role}: login ${r.rolcanlogin}, superuser ${r.rolsuper}, createrole ${r.rolcreaterole}, member of ${r.groups.join(",") || "nothing"}`,
      );
  }
  if (problems.length) throw new Error(problems.join("; "));
  return `sessions from the pod network: ${[...seen].map(([k, n]) => `${k} (up to ${n})`).join(", ")}, nothing else; ${jobLogins.length} logins made by the migration Job, each LOGIN, not superuser, not CREATEROLE, member of its group role only`;
}

/**
 * Pod Security "restricted" is enforced: a pod that baseline would admit but restricted does not
 * (no securityContext: privilege escalation allowed, capabilities kept, no seccomp profile) is
 * refused, and the same pod made compliant is admitted (server-side dry runs: nothing is created).
 */
function podSecurityControls(k: Kube, image: ImageRef): string {
  const ns = JSON.parse(k.must(["get", "ns", NAMESPACE, "-o", "json"])) as { metadata: { labels: Record<string, string> } };
  if (ns.metadata.labels["pod-security.kubernetes.io/enforce"] !== "restricted") throw new Error("namespace is not labelled enforce=restricted");
  const pod = (securityContext: Record<string, unknown>, podSecurity: Record<string, unknown>) =>
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "psa-probe", namespace: NAMESPACE },
      spec: {
        securityContext: podSecurity,
        containers: [{ name: "probe", image: `${image.repository}:${image.tag}`, command: ["node", "-e", "0"], securityContext }],
      },
    });
  const restricted = { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
  const refused = k.kubectl(["create", "--dry-run=server", "-f", "-"], pod({}, {}));
  if (refused.status === 0 || !/violates PodSecurity "restricted/.test(refused.stderr)) {
    throw new Error(`a pod without a restricted securityContext was not refused by Pod Security: ${refused.stderr || refused.stdout}`);
  }
  const admitted = k.kubectl(["create", "--dry-run=server", "-f", "-"], pod(restricted, { runAsUser: 10001, seccompProfile: { type: "RuntimeDefault" } }));
  if (admitted.status !== 0) throw new Error(`a compliant pod was refused: ${admitted.stderr}`);
  return `pod without a securityContext refused (${refused.stderr.match(/violates PodSecurity "[^"]+"/)?.[0]}), the same pod made compliant admitted`;
}

/**
 * Every Deployment of the release is fully Ready. Every container that serves gRPC (lock,
 * rail-proxy, payouts, rail-stub) is started, made Ready and kept alive by kubelet gRPC probes
 * against grpc.health.v1; the executor serves no gRPC and has its HTTP liveness probe.
 */
function everyPodReady(k: Kube): string {
  type ProbedPod = Pod & {
    spec: {
      containers: Array<{
        name: string;
        readinessProbe?: { grpc?: unknown; httpGet?: { path?: string } };
        livenessProbe?: { grpc?: unknown; httpGet?: { path?: string } };
        startupProbe?: { grpc?: unknown; httpGet?: { path?: string } };
      }>;
    };
  };
  const deploys = k.json<KubeList<{ metadata: { name: string }; spec: { replicas: number }; status: { readyReplicas?: number } }>>([
    "-n",
    NAMESPACE,
    "get",
    "deploy",
    "-l",
    SEL,
  ]);
  // Pods of the Deployments only: a CronJob's reconciler pod may be running at this moment.
  const all = k.json<KubeList<ProbedPod & { metadata: { ownerReferences?: Array<{ kind: string }> } }>>([
    "-n",
    NAMESPACE,
    "get",
    "pods",
    "-l",
    SEL,
    "--field-selector=status.phase=Running",
  ]);
  const pods = { items: all.items.filter((p) => p.metadata.ownerReferences?.some((o) => o.kind === "ReplicaSet")) };
  const problems: string[] = [];
  let grpcPods = 0;
  for (const d of deploys.items)
    if ((d.status.readyReplicas ?? 0) !== d.spec.replicas) problems.push(`${d.metadata.name}: ${d.status.readyReplicas ?? 0}/${d.spec.replicas} ready`);
  for (const p of pods.items) {
    if (!podReady(p)) problems.push(`${p.metadata.name} not Ready`);
    const comp = p.metadata.labels?.["app.kubernetes.io/component"];
    for (const c of p.spec.containers) {
      if (comp === "executor") {
        if (!c.livenessProbe?.httpGet) problems.push(`${p.metadata.name}/${c.name}: no HTTP liveness probe`);
      } else if (
        c.readinessProbe?.httpGet?.path !== "/readyz" ||
        c.livenessProbe?.httpGet?.path !== "/healthz" ||
        c.startupProbe?.httpGet?.path !== "/healthz"
      ) {
        // Mutual TLS: the kubelet has no client certificate, so the servers are probed on their
        // plain-HTTP metrics port (/readyz mirrors grpc.health.v1).
        problems.push(`${p.metadata.name}/${c.name}: not the metrics port's /healthz and /readyz probes`);
      } else grpcPods++;
    }
  }
  if (deploys.items.length < 5) problems.push(`only ${deploys.items.length} Deployments`);
  if (problems.length) throw new Error(problems.join("; "));
  return `${deploys.items.length} Deployments, ${pods.items.length} pods Ready; ${grpcPods} gRPC servers serving mutual TLS only, probed on their metrics port (/healthz startup and liveness, /readyz readiness mirroring grpc.health.v1), executors with their HTTP liveness probe`;
}

/**
 * The executor's login (what a compromised executor pod holds) on paydb: the signing key and the
 * rail-proxy's ledger are refused (42501); the payouts it works on are readable (the control).
 */
async function executorGrants(d: Databases): Promise<string> {
  const role = LOGINS.find((l) => l.component === "executor")!.role;
  const c = new pg.Client({ connectionString: d.nodeUrl("paydb", role) });
  await c.connect();
  try {
    const attempt = async (sql: string) => {
      try {
        await c.query(sql);
        return "allowed";
      } catch (err) {
        return (err as { code?: string }).code ?? "error";
      }
    };
    const refused = {
      fence_signing_key: await attempt("SELECT * FROM fence_signing_key"),
      rail_submissions: await attempt("SELECT * FROM rail_submissions LIMIT 1"),
    };
    const control = await attempt("SELECT payout_id FROM payouts LIMIT 1");
    const wrong = Object.entries(refused).filter(([, v]) => v !== "42501");
    if (wrong.length || control !== "allowed") throw new Error(`as ${role}: ${JSON.stringify({ ...refused, payouts: control })}`);
    return `as ${role}: fence_signing_key 42501, rail_submissions 42501; payouts readable (control)`;
  } finally {
    await c.end();
  }
}

/** Which transport and token mode the release runs, read from the Deployments themselves. */
function securityMode(k: Kube): string {
  const deploys = k.json<
    KubeList<{ metadata: { name: string }; spec: { template: { spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> } } } }>
  >(["-n", NAMESPACE, "get", "deploy", "-l", SEL]);
  const rows = deploys.items.map((d) => {
    const env = Object.fromEntries((d.spec.template.spec.containers[0]!.env ?? []).map((e) => [e.name, e.value ?? ""]));
    const transport = env.TLS_CERT_FILE ? `mutual TLS (client auth ${env.TLS_CLIENT_AUTH})` : `cleartext (ALLOW_INSECURE=${env.ALLOW_INSECURE})`;
    const tokens = env.LOCK_TOKEN_SIGNING_KEY_FILE ? "signs tokens" : env.RAIL_PROXY_TOKEN_KEY_FILE ? "verifies token signatures" : "";
    return `| ${d.metadata.name} | ${transport} | ${tokens || "-"} |`;
  });
  const cleartext = rows.filter((r) => r.includes("cleartext")).length;
  if (cleartext) throw new Error(`${cleartext} Deployments run cleartext: the chart's defaults are mutual TLS`);
  return [
    "Installed with the chart's defaults (no tls or tokenSigning values): mutual TLS from the chart's own CA, fencing tokens signed with the key it generated.",
    "",
    "| Deployment | transport | tokens |",
    "|---|---|---|",
    ...rows,
  ].join("\n");
}

/** sha256 of each Secret the chart generates and must keep across upgrades. */
function keptSecrets(k: Kube): Record<string, string> {
  const names = [
    `${RELEASE}-tls-ca`,
    `${RELEASE}-token-signing`,
    ...["lock", "rail-proxy", "payouts", "executor", "reconciler", "audit", "rail-stub"].map((c) => `${RELEASE}-${c}-tls`),
  ];
  return Object.fromEntries(names.map((n) => [n, k.must(["-n", NAMESPACE, "get", "secret", n, "-o", "jsonpath={.data}"]).trim()]));
}

async function payoutAndTrace(payoutsUrl: string, otlp: OtlpReceiver): Promise<string> {
  const client = payoutsClient(payoutsUrl, clientTls);
  const created = await until(
    async () => {
      try {
        return await client.createPayout(
          { accountId: "acc-cluster", amount: { amountMinor: 1050n, currency: "EUR" }, beneficiary: "ben-cluster" },
          { headers: { "idempotency-key": "cluster-first-payout" } },
        );
      } catch (err) {
        log(`   CreatePayout: ${(err as Error).message}`);
        return undefined;
      }
    },
    "CreatePayout through the payouts Service",
    60_000,
    2000,
  );
  const payoutId = created.payout!.payoutId;
  await until(async () => (await client.getPayout({ payoutId })).payout?.state === PayoutState.PAID, `payout ${payoutId} PAID`, 60_000);
  const wanted = ["payouts", "executor", "lock", "rail-proxy", "rail-stub"];
  const trace = await until(
    () => {
      const submit = otlp.spans.find(
        (s) =>
          s.service === "rail-proxy" && s.kind === 2 && s.name.endsWith("SubmitPayout") && String(s.attributes["railfence.payout_id"] ?? "").includes(payoutId),
      );
      if (!submit) return undefined;
      const spans = otlp.spans.filter((s) => s.traceId === submit.traceId);
      const ids = new Set(spans.map((s) => s.spanId));
      const roots = spans.filter((s) => !ids.has(s.parentSpanId));
      const services = new Set(spans.map((s) => s.service));
      return wanted.every((w) => services.has(w)) && roots.length === 1 ? { spans, root: roots[0]! } : undefined;
    },
    `one connected trace with spans from ${wanted.join(", ")}`,
    60_000,
  );
  return `payout ${payoutId} PAID; trace ${trace.spans[0]!.traceId}: ${trace.spans.length} spans from ${wanted.join(", ")}, root ${trace.root.name} [${trace.root.service}]`;
}

interface Kill {
  at: string;
  pod: string;
  mode: string;
}

async function replicaKillDrill(k: Kube, image: ImageRef, d: Databases) {
  const env = {
    ...k.env,
    PATH: `${dirname(k.info.kubectl)}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    NAMESPACE,
    RELEASE,
    IMAGE: `${image.repository}:${image.tag}`,
    // Under the chart's mutual TLS the load Job presents an API client's certificate.
    CLIENT_TLS_SECRET,
    PAYOUTS: process.env.CLUSTER_DRILL_PAYOUTS ?? "600",
    ACCOUNTS: "20",
    CONCURRENCY: "8",
    KILL_EVERY_S: "6",
    // Both kinds of kill: force deletion (what a managed cluster offers) and a real SIGKILL of
    // the container through the node's containerd (a process dying mid-call).
    KILL_MODE: "mixed",
    // The replica up longest holds the executors' HTTP/2 connections: its death lands mid-call.
    VICTIM: "oldest",
    SIGKILL_CMD: `ctr --address ${k.info.containerdAddress} -n k8s.io tasks kill -s SIGKILL`,
    SETTLE_S: "20",
    TIMEOUT_S: "600",
  };
  const r = await runScript(join(root, "deploy", "drills", "replica-kill.sh"), [], env, (l) => log(`  ${l}`));
  const kills: Kill[] = [...r.stdout.matchAll(/^(\S+) kill pod\/(\S+) (\S+)$/gm)].map((m) => ({ at: m[1]!, pod: m[2]!, mode: m[3]! }));
  const loadSummary = (r.stdout.match(/^\{"event":"load_done".*$/m) ?? ["(no load summary)"])[0];
  const audit = parseAuditReport(r.stdout);
  if (r.status !== 0) throw new Error(`replica-kill.sh exited ${r.status}${audit ? `: audit ${audit.verdict}, ${violationLines(audit.violations)}` : ""}`);
  // Exit 0 must mean the audit ran and passed, not that nothing was checked.
  if (audit?.verdict !== "PASS" || audit.violations.length) throw new Error(`replica-kill.sh exited 0 without a passing audit report in its output`);
  if (audit.counts.payouts < Number(env.PAYOUTS))
    throw new Error(`the drill's audit saw ${audit.counts.payouts} payouts, the load created ${env.PAYOUTS}: not this run's window`);
  if (kills.length < 3) throw new Error(`only ${kills.length} kills: the load ended before the drill could kill repeatedly`);
  // Which submissions each killed pod left behind mid-call (swept: STALE_FORWARDING).
  const byPod = new Map<string, number>();
  const rows = await query<{ replica_id: string; n: number }>(
    d,
    "paydb",
    "SELECT replica_id, count(*)::int AS n FROM rail_submissions WHERE ambiguity_cause IS NOT NULL GROUP BY replica_id",
  );
  for (const row of rows) byPod.set(row.replica_id, row.n);
  const killed = new Set(kills.map((x) => x.pod));
  const foreign = rows.filter((row) => !killed.has(row.replica_id));
  if (foreign.length) throw new Error(`ambiguous submissions from pods that were not killed: ${foreign.map((f) => `${f.replica_id} (${f.n})`).join(", ")}`);
  const ambiguous = rows.reduce((a, b) => a + b.n, 0);
  // The point of the drill is a process dying between intent commit and rail answer.
  if (ambiguous === 0) throw new Error("no kill landed mid-call (no ambiguous submission): the drill proved nothing about ambiguity");
  return { kills, byPod, ambiguous, status: r.status, loadSummary, audit };
}

async function query<T>(d: Databases, db: "paydb" | "raildb", sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: d.nodeUrl(db) });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

/**
 * Runs the reconciler the way the chart schedules it (a Job from its CronJob) until the audit
 * on the node finds no ambiguous submission and no UNKNOWN payout left in the window (the
 * settlement window makes young rows wait for a later run; the chart's own CronJob may get there
 * first, which is as good). Then the verdict: the release's audit Job (`railfence check`, exit 0,
 * PASS, nothing left open), and the same audit on the node over the rail's own ledger, which must
 * agree. A payout still UNKNOWN when nothing is ambiguous any more is a failure, explained in
 * the report with its fence and its submissions.
 */
async function reconcileAndCheck(k: Kube, d: Databases, tag: string, since: string): Promise<{ summary: string; details: string; violations: number }> {
  let runs = 0;
  let settledRuns = 0;
  for (;;) {
    const job = `reconcile-${tag}-${++runs}`;
    k.must(["-n", NAMESPACE, "create", "job", job, `--from=cronjob/${RELEASE}-reconciler`]);
    const w = k.kubectl(["-n", NAMESPACE, "wait", "--for=condition=complete", `job/${job}`, "--timeout=180s"]);
    if (w.status !== 0) throw new Error(`reconciler job ${job} did not complete: ${k.kubectl(["-n", NAMESPACE, "logs", `job/${job}`, "--tail=20"]).stdout}`);
    const state = await hostAudit(d, since);
    log(`   reconciler run ${runs}: ${state.counts.ambiguousUnresolved} ambiguous left, ${state.counts.payoutsUnknown} payouts UNKNOWN`);
    if (state.counts.ambiguousUnresolved === 0 && state.counts.payoutsUnknown === 0) break;
    // Nothing ambiguous left: one more run has the reconciler's UNKNOWN sync pass; after that,
    // an UNKNOWN payout has nothing left that could close it.
    if (state.counts.ambiguousUnresolved === 0 && ++settledRuns >= 2) break;
    if (runs >= 8) throw new Error(`${state.counts.ambiguousUnresolved} ambiguous submissions still unresolved after ${runs} reconciler runs`);
    // Nothing younger than the settlement window (30 s) is decided NOT_PAID: let it age.
    await sleep(10_000);
  }
  const audit = await auditJob(k, tag, since);
  const r = audit.report;
  if (!r) throw new Error(`audit Job exited ${audit.code} without a report: ${audit.log.slice(-600)}`);
  if (audit.code !== 0 || r.verdict !== "PASS" || r.violations.length)
    throw new Error(`audit Job exited ${audit.code} (${r.verdict}): ${violationLines(r.violations)}`);
  const stuck = await stuckUnknown(d, since);
  if (stuck.length) {
    report.section(`Payouts left UNKNOWN after the ${tag} (reconciler runs: ${runs})`, stuck.join("\n"));
    throw new Error(
      `${r.counts.payoutsUnknown} payouts stay UNKNOWN although nothing is ambiguous any more (the audit Job: exit 0, ${r.verdict}, ${r.counts.resolvedNotPaid} resolved NOT_PAID): ${stuck.length - 2} rows in the report's section "Payouts left UNKNOWN"`,
    );
  }
  if (r.counts.ambiguousUnresolved !== 0 || r.counts.payoutsUnknown !== 0 || r.counts.payoutsOpen !== 0)
    throw new Error(`the audit still sees ${r.counts.ambiguousUnresolved} ambiguous, ${r.counts.payoutsUnknown} UNKNOWN, ${r.counts.payoutsOpen} open payouts`);
  const host = await hostAudit(d, since);
  if (host.violations.length) throw new Error(`the audit over the rail's own ledger: ${violationLines(host.violations)}`);
  const compared = ["railPayments", "railAccepted", "intents", "payouts", "payoutsPaid", "payoutsFailed", "resolvedPaid", "resolvedNotPaid"] as const;
  const differ = compared.filter((c) => r.counts[c] !== host.counts[c]);
  if (differ.length)
    throw new Error(`the release's audit and the ledger audit disagree on ${differ.map((c) => `${c} (${r.counts[c]} vs ${host.counts[c]})`).join(", ")}`);
  const c = r.counts;
  const summary = `${runs} reconciler Job run(s); audit Job exit 0, ${r.verdict}: ${c.payouts} payouts (${c.payoutsPaid} PAID, ${c.payoutsFailed} FAILED), ${c.railAccepted} rail payments, ambiguous resolved paid ${c.resolvedPaid} / not paid ${c.resolvedNotPaid}, 0 unresolved; the ledger audit agrees`;
  const details = [
    `Verdict after the reconciler: a Job from cronjob/${RELEASE}-audit (\`railfence check --since ${since} --quiescent --json\`), exit ${audit.code}, ${r.verdict}:`,
    "```",
    formatTable(r),
    "```",
    `Counts: ${JSON.stringify(r.counts)}. The same audit on the node over the rail's own ledger (raildb): 0 violations, equal on ${compared.join(", ")}.`,
  ].join("\n");
  return { summary, details, violations: r.violations.length };
}

/** UNKNOWN payouts of the window with their fence and their submissions, as a table (empty: none). */
async function stuckUnknown(d: Databases, since: string): Promise<string[]> {
  const rows = await query<{ payout_id: string; fence: string; reason: string | null; submissions: string }>(
    d,
    "paydb",
    `SELECT p.payout_id, p.fence::text, p.failure_reason AS reason,
            string_agg(s.state || ' token ' || s.fencing_token || COALESCE(' by ' || s.resolution_actor, '') || ' (' || s.replica_id || ')', '; ' ORDER BY s.created_at) AS submissions
       FROM payouts p LEFT JOIN rail_submissions s ON s.bound_payout_id = p.payout_id
      WHERE p.state = 'UNKNOWN' AND p.created_at >= $1 GROUP BY 1, 2, 3 ORDER BY 1`,
    [since],
  );
  if (!rows.length) return [];
  return [
    "| payout | fence | failure_reason | its submissions |",
    "|---|---|---|---|",
    ...rows.map((r) => `| ${r.payout_id} | ${r.fence} | ${r.reason ?? "-"} | ${r.submissions ?? "none"} |`),
  ];
}

/**
 * Negative control of the verdict: a second payment of a PAID payout, under an unrelated
 * reference, booked on the rail's ledger (as a rail that paid twice would show it). The same
 * audit Job must exit 5 and name that payout under INV-02; with the row removed it passes again.
 */
async function auditNegativeControl(k: Kube, d: Databases): Promise<string> {
  const planted = `rr_planted_${Date.now().toString(36)}`;
  const [p] = await query<{ payout_id: string; account_id: string; beneficiary: string; amount_minor: string; currency: string }>(
    d,
    "paydb",
    "SELECT payout_id, account_id, beneficiary, amount_minor::text, currency FROM payouts WHERE state = 'PAID' ORDER BY created_at DESC LIMIT 1",
  );
  if (!p) throw new Error("no PAID payout to plant a second payment for");
  await query(
    d,
    "raildb",
    "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ($1, $2, $3, $4, $5, $6, 'ACCEPTED')",
    [planted, `${p.payout_id}.retry`, p.account_id, p.beneficiary, p.amount_minor, p.currency],
  );
  let caught;
  try {
    caught = await auditJob(k, "planted");
  } finally {
    await query(d, "raildb", "DELETE FROM payments WHERE rail_reference = $1", [planted]);
  }
  const inv02 = caught.report?.violations.filter((v) => v.invariant === "INV-02") ?? [];
  if (caught.code !== 5 || caught.report?.verdict !== "FAIL")
    throw new Error(`with a planted double payment the audit Job exited ${caught.code} (${caught.report?.verdict ?? "no report"}), not 5 FAIL`);
  if (inv02.map((v) => v.row.payout_id).join() !== p.payout_id || !JSON.stringify(inv02[0]!.row).includes(planted))
    throw new Error(`the audit did not name the planted payment: ${violationLines(caught.report!.violations)}`);
  const again = await auditJob(k, "cleaned");
  if (again.code !== 0 || again.report?.verdict !== "PASS") throw new Error(`with the planted payment removed the audit Job exited ${again.code}`);
  return `a second payment of PAID payout ${p.payout_id} (${planted}) on the rail's ledger: the audit Job exited 5, FAIL, INV-02 naming that payout and payment; removed: exit 0, PASS`;
}

/** The ambiguous submissions and how they were closed, for the report. */
async function ambiguityTable(d: Databases, since?: Date): Promise<string> {
  const rows = await query<{
    payout_id: string;
    replica_id: string;
    ambiguity_cause: string;
    state: string;
    resolution_outcome: string | null;
    resolution_actor: string | null;
  }>(
    d,
    "paydb",
    `SELECT payout_id, replica_id, ambiguity_cause, state, resolution_outcome, resolution_actor FROM rail_submissions
      WHERE ambiguity_cause IS NOT NULL ${since ? "AND created_at >= $1" : ""} ORDER BY created_at`,
    since ? [since] : [],
  );
  if (!rows.length) return "No ambiguous submission.";
  return [
    "| submission | replica (pod) | cause | state | resolved as | by |",
    "|---|---|---|---|---|---|",
    ...rows.map(
      (r) => `| ${r.payout_id} | ${r.replica_id} | ${r.ambiguity_cause} | ${r.state} | ${r.resolution_outcome ?? "-"} | ${r.resolution_actor ?? "-"} |`,
    ),
  ].join("\n");
}

async function rollingUpgrade(k: Kube, profile: string, image: ImageRef, payoutsUrl: string, d: Databases) {
  const podsOf = (c: string) => k.json<KubeList<Pod>>(["-n", NAMESPACE, "get", "pods", "-l", component(c)]).items.map((p) => p.metadata.name);
  const oldProxies = new Set(podsOf("rail-proxy"));
  const oldPods = new Set(k.json<KubeList<Pod>>(["-n", NAMESPACE, "get", "pods", "-l", SEL]).items.map((p) => p.metadata.name));
  const runId = `upg${Date.now().toString(36)}`;
  const t0 = new Date();
  const watcher = new PodWatcher(k, NAMESPACE, SEL);
  const kept = keptSecrets(k);
  const load = new HostLoad(payoutsUrl, runId, { concurrency: 4, accounts: 10, pauseMs: 100 }, clientTls).start();
  await sleep(5000);
  const u0 = Date.now();
  // Asynchronous: a synchronous child would freeze this process's load clients for the whole
  // upgrade (the first runs did exactly that: no call was made during the rollout).
  const up = await k.helmAsync([
    "upgrade",
    RELEASE,
    chartDir,
    "-n",
    NAMESPACE,
    "-f",
    profile,
    "--set",
    `image.tag=${image.upgradeTag}`,
    "--wait",
    "--timeout",
    "10m",
  ]);
  const upgradeSeconds = (Date.now() - u0) / 1000;
  await sleep(5000);
  await load.stop();
  await watcher.stop();
  if (up.status !== 0) throw new Error(`helm upgrade failed: ${up.stderr}`);

  // Every pod of the release now runs the new tag, and none of the old pods is left.
  // Deployment pods only: a reconciler pod the CronJob started before the upgrade keeps its tag.
  const pods = k
    .json<KubeList<Pod & { metadata: { ownerReferences?: Array<{ kind: string }> } }>>([
      "-n",
      NAMESPACE,
      "get",
      "pods",
      "-l",
      SEL,
      "--field-selector=status.phase=Running",
    ])
    .items.filter((p) => p.metadata.ownerReferences?.some((o) => o.kind === "ReplicaSet"));
  const stale = pods.filter((p) => oldPods.has(p.metadata.name) || p.spec.containers.some((c) => !c.image.endsWith(`:${image.upgradeTag}`)));
  if (stale.length) throw new Error(`pods not upgraded: ${stale.map((p) => p.metadata.name).join(", ")}`);

  // The load really ran during the rollout (not only before and after it).
  const u1 = u0 + upgradeSeconds * 1000;
  const duringUpgrade = load.intents.filter((i) => i.createdAt && i.createdAt >= u0 && i.createdAt <= u1).length;
  if (duringUpgrade < 10) throw new Error(`only ${duringUpgrade} payouts were created while the upgrade ran: not an upgrade under load`);

  // No submission lost: every intent got its payout (retried with its own key), exactly once.
  const lost = load.intents.filter((i) => !i.payoutId);
  if (lost.length)
    throw new Error(
      `${lost.length} intents never got a payout: ${lost
        .slice(0, 3)
        .map((i) => `${i.clientReference} ${i.errors.slice(-1)[0]}`)
        .join("; ")}`,
    );
  const dup = await query<{ client_reference: string; n: number }>(
    d,
    "paydb",
    "SELECT client_reference, count(*)::int AS n FROM payouts WHERE client_reference LIKE $1 GROUP BY client_reference HAVING count(*) <> 1",
    [`${runId}-%`],
  );
  if (dup.length) throw new Error(`client references with more than one payout: ${dup.map((x) => x.client_reference).join(", ")}`);
  const ids = load.intents.map((i) => i.payoutId!);
  const states = await waitSettled(payoutsUrl, ids, 120_000, clientTls);
  // The chart's CA, certificates and signing key are kept across the upgrade (lookup).
  const after = keptSecrets(k);
  const changed = Object.keys(kept).filter((n) => kept[n] !== after[n]);
  if (changed.length) throw new Error(`helm upgrade replaced ${changed.join(", ")}: the chart must keep its CA, certificates and signing key`);
  const unsettled = ids.filter((id) => ![PayoutState.PAID, PayoutState.FAILED, PayoutState.UNKNOWN].includes(states.get(id)!));
  if (unsettled.length) throw new Error(`${unsettled.length} payouts not settled after the upgrade`);

  // Ambiguity only where a pod died mid-call: a rail-proxy pod that was stopping when its
  // FORWARDING row was left behind (STALE_FORWARDING, the row's replica), or the rail-stub pod
  // the call went to, stopping while the call was open (RAIL_ERROR / RAIL_DEADLINE: the proxy
  // lived, the rail's answer was lost). Anything else is ambiguity nobody's death explains.
  const ambiguous = await query<{ payout_id: string; replica_id: string; ambiguity_cause: string; created_ms: number }>(
    d,
    "paydb",
    "SELECT payout_id, replica_id, ambiguity_cause, (extract(epoch FROM created_at) * 1000)::float8 AS created_ms FROM rail_submissions WHERE ambiguity_cause IS NOT NULL AND created_at >= $1",
    [t0],
  );
  const slack = 6000; // the rail deadline (5 s) plus a second of polling
  const explained = ambiguous.map((a) => {
    const proxy =
      a.ambiguity_cause === "STALE_FORWARDING" ? watcher.stoppingAt("rail-proxy", a.created_ms, slack).find((p) => p.name === a.replica_id) : undefined;
    const rail = a.ambiguity_cause !== "STALE_FORWARDING" ? watcher.stoppingAt("rail-stub", a.created_ms, slack)[0] : undefined;
    return { ...a, by: proxy ? `rail-proxy ${proxy.name} stopping` : rail ? `rail-stub ${rail.name} stopping` : undefined };
  });
  const unexplained = explained.filter((a) => !a.by);
  if (unexplained.length) {
    throw new Error(
      `ambiguous submissions no stopping pod explains: ${unexplained.map((a) => `${a.payout_id} (${a.ambiguity_cause}, replica ${a.replica_id}, at ${new Date(a.created_ms).toISOString().slice(11, 23)})`).join("; ")}; pods stopped: ${[
        ...watcher.pods.values(),
      ]
        .filter((p) => p.stopAsked)
        .map((p) => `${p.name} ${new Date(p.stopAsked!).toISOString().slice(11, 19)}-${new Date(p.lastSeen).toISOString().slice(11, 19)}`)
        .join(", ")}`,
    );
  }
  // The upgrade's own window (the drill's payouts were audited by the drill's step).
  const checked = await reconcileAndCheck(k, d, "upgrade", `${new Date(t0.getTime() - 60_000).toISOString().slice(0, 19)}Z`);
  const closed = await ambiguityTable(d, t0);
  const retried = load.intents.filter((i) => i.attempts > 1);
  const errors = new Map<string, number>();
  for (const i of load.intents) for (const e of i.errors) errors.set(e.split(":")[0]!, (errors.get(e.split(":")[0]!) ?? 0) + 1);
  const paid = ids.filter((id) => states.get(id) === PayoutState.PAID).length;
  const summary = `CA, ${Object.keys(kept).length - 2} certificates and the signing key kept; ${image.tag} -> ${image.upgradeTag} in ${upgradeSeconds.toFixed(0)} s under load: ${load.intents.length} payouts created (${duringUpgrade} during the rollout), none lost, ${retried.length} needed a retry, ${ambiguous.length} ambiguous (each while a pod was stopping mid-call; resolved), audit ${checked.violations} violations`;
  const details = [
    `\`helm upgrade --set image.tag=${image.upgradeTag}\` (from ${image.tag}; the same image content under a second tag, so the rollout itself is what is tested) took ${upgradeSeconds.toFixed(1)} s with the pre-upgrade migration hook, while ${load.intents.length} payouts were created through the payouts Service (4 concurrent clients, one Idempotency-Key per payout, retried with the same key).`,
    "",
    `- ${duringUpgrade} payouts were created while the rollout ran, ${load.intents.length} in all (5 s of load before and after)`,
    `- every intent got exactly one payout (${load.intents.length} / ${load.intents.length}); ${retried.length} needed more than one attempt; errors seen by clients: ${[...errors].map(([c, n]) => `${c} ×${n}`).join(", ") || "none"}`,
    `- payouts settled: ${paid} PAID, ${ids.length - paid} other (FAILED/UNKNOWN before reconciliation)`,
    `- ambiguous submissions during the upgrade: ${ambiguous.length}${explained.length ? `, each explained by a pod stopping mid-call: ${explained.map((a) => `${a.payout_id} ${a.ambiguity_cause} (${a.by})`).join("; ")}` : ""}; all resolved by the reconciler (below)`,
    `- old rail-proxy pods: ${[...oldProxies].join(", ")}`,
    "",
    ...(load.intents.some((i) => i.errors.length)
      ? [
          "Failed attempts (each retried with the same Idempotency-Key):",
          "",
          ...load.intents.flatMap((i) => i.errors.map((e) => `- ${i.clientReference}: ${e}`)).slice(0, 20),
          "",
        ]
      : []),
    `Upgrade window: ${new Date(u0).toISOString().slice(11, 23)} to ${new Date(u0 + upgradeSeconds * 1000).toISOString().slice(11, 23)}.`,
    "",
    "Ambiguous submissions of the upgrade and how they were closed:",
    "",
    closed,
    "",
    checked.details,
  ].join("\n");
  return { summary, details };
}

/**
 * kubectl drain of the node, limited to rail-proxy pods: the PDB (minAvailable 1) lets one pod
 * go and refuses the other, so at least one proxy endpoint stays Ready throughout (watched
 * through the Service's EndpointSlices). Negative control: without the PDB the same drain
 * evicts both and the watcher sees zero Ready endpoints.
 */
async function drainAgainstPdb(k: Kube, node: string) {
  const pdbName = `${RELEASE}-rail-proxy`;
  const drainArgs = (timeout: string) => [
    "drain",
    node,
    `--pod-selector=${component("rail-proxy")}`,
    "--delete-emptydir-data",
    "--ignore-daemonsets",
    `--timeout=${timeout}`,
  ];
  const readyEndpoints = (): number => {
    const r = k.kubectl(["-n", NAMESPACE, "get", "endpointslices", "-l", `kubernetes.io/service-name=${RELEASE}-rail-proxy`, "-o", "json"]);
    if (r.status !== 0) return -1;
    const slices = JSON.parse(r.stdout) as KubeList<{ metadata: { name: string }; endpoints?: Array<{ conditions?: { ready?: boolean } }> }>;
    return slices.items.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready).length;
  };
  const watchDuring = async (run: Promise<{ status: number; stdout: string; stderr: string }>) => {
    let min = Number.MAX_SAFE_INTEGER;
    let samples = 0;
    let done = false;
    const result = run.then((r) => ((done = true), r));
    while (!done) {
      const n = readyEndpoints();
      if (n >= 0) {
        min = Math.min(min, n);
        samples++;
      }
      await sleep(250);
    }
    return { result: await result, min, samples };
  };
  const restore = async () => {
    k.must(["uncordon", node]);
    await until(() => readyEndpoints() === 2, "two Ready rail-proxy endpoints again", 180_000);
  };

  await until(() => readyEndpoints() === 2, "two Ready rail-proxy endpoints before the drain", 120_000);
  const guarded = await watchDuring(k.kubectlAsync(drainArgs("45s")));
  await restore();
  const out = guarded.result.stdout + guarded.result.stderr;
  const refusals = (out.match(/disruption budget/g) ?? []).length;
  const evicted = (out.match(/evicted/g) ?? []).length;
  if (guarded.result.status === 0) throw new Error("drain completed although the PDB allows only one of two rail-proxy pods to go");
  if (refusals === 0) throw new Error(`drain failed without a PDB refusal: ${out.slice(-400)}`);
  if (guarded.min < 1) throw new Error(`a moment with ${guarded.min} Ready rail-proxy endpoints during the drain`);

  // Negative control: the watcher must see the outage the PDB prevents.
  const pdb = JSON.parse(k.must(["-n", NAMESPACE, "get", "pdb", pdbName, "-o", "json"])) as { metadata: Record<string, unknown>; status?: unknown };
  k.must(["-n", NAMESPACE, "delete", "pdb", pdbName]);
  let unguarded;
  try {
    unguarded = await watchDuring(k.kubectlAsync(drainArgs("90s")));
  } finally {
    const { name, namespace, labels, annotations } = pdb.metadata as Record<string, unknown>;
    k.must(["apply", "-f", "-"], JSON.stringify({ ...pdb, metadata: { name, namespace, labels, annotations }, status: undefined }));
    await restore();
  }
  if (unguarded.result.status !== 0) throw new Error(`drain without the PDB failed: ${unguarded.result.stderr.slice(-300)}`);
  if (unguarded.min !== 0) throw new Error(`negative control: without the PDB the watcher never saw zero Ready endpoints (min ${unguarded.min})`);
  const summary = `with the PDB: ${evicted} evicted, ${refusals} evictions refused, min Ready endpoints ${guarded.min} over ${guarded.samples} samples; without it (control): min ${unguarded.min}`;
  const details = [
    `\`kubectl ${drainArgs("45s").join(" ")}\` (one node, so the evicted pod's replacement stays Pending while the node is cordoned):`,
    "",
    `- exit ${guarded.result.status}; ${evicted} pod evicted; ${refusals} eviction attempts answered "Cannot evict pod as it would violate the pod's disruption budget"`,
    `- Ready rail-proxy endpoints, sampled every 250 ms through the drain: minimum ${guarded.min} (${guarded.samples} samples)`,
    `- negative control: the PDB deleted, the same drain evicted both pods and the watcher saw ${unguarded.min} Ready endpoints (${unguarded.samples} samples); the PDB was restored afterwards`,
  ].join("\n");
  return { summary, details };
}

async function teardown(): Promise<void> {
  if (keep) {
    log("CLUSTER_KEEP=1: the cluster and the release stay (deploy/cluster/down.sh removes them); PostgreSQL and the receiver stop with this process");
  } else {
    await report
      .step("teardown (helm uninstall, deploy/cluster/down.sh)", async () => {
        if (kube) kube.helm(["uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "2m"]);
        const r = await runScript(join(clusterDir, "down.sh"), [], {}, (l) => log(`  ${l}`));
        if (r.status !== 0) throw new Error(`down.sh exited ${r.status}`);
      })
      .catch(() => {});
  }
  await dbs?.server.destroy().catch(() => {});
  await receiver?.stop().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}

try {
  await main();
} catch (err) {
  report.failed = true;
  log(`stopped: ${(err as Error).stack ?? err}`);
} finally {
  await teardown();
  const file = report.write(join(root, "reports", "cluster"));
  console.log(`\n${report.markdown()}`);
  log(`report: ${file}`);
  process.exit(report.failed ? 1 : 0);
}
