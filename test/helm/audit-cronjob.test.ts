/**
 * The daily audit CronJob (templates/audit.yaml): `railfence check` as production runs it. Its
 * command is a valid `check` invocation that the CLI itself parses, it reads paydb as the
 * auditor's own login with the auditor's password only, reaches rail-proxy (and nothing but DNS
 * and PostgreSQL besides), presents its own certificate under mutual TLS, runs like every other
 * pod (uid 10001, read-only root, no capabilities, its own ServiceAccount), and never retries a
 * failed run (the alert counts failed pods). The container smoke test runs this very pod.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseLine } from "../../services/cli/args.js";
import { parseInstant } from "../../services/cli/check-command.js";
import { findCommand } from "../../services/cli/cli.js";
import { GLOBAL_OPTIONS } from "../../services/cli/args.js";
import { resolveEndpoints } from "../../services/cli/endpoints.js";
import { fileSource, securityViolations } from "./chart-checks.js";
import { helm } from "./helm-tool.js";
import { containerEnv, renderedSecrets } from "./pod-env.js";
import { byKind, component, podSpecs, render, templateArgs, type K8sObject } from "./render.js";

const MINIMAL = ["rail.url=https://rail.example.com", "rail.existingSecret=rail-cred", "rail.egress.cidrs={203.0.113.0/24}"];
const OWN_SECRET = [
  ...MINIMAL,
  "database.paydb.credentials.auditor.existingSecret=db-auditor",
  "database.paydb.credentials.reconciler.existingSecret=db-reconciler",
];
const dir = mkdtempSync(join(tmpdir(), "railfence-audit-chart-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cronJob = (objects: K8sObject[]) => byKind(objects, "CronJob").find((o) => component(o) === "audit");
const podOf = (objects: K8sObject[]) => cronJob(objects)!.spec.jobTemplate.spec.template.spec;
const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).filter((e: any) => "value" in e).map((e: any) => [e.name, e.value]));

describe("audit CronJob: what it runs", () => {
  const objects = render({ set: OWN_SECRET });
  const pod = podOf(objects);
  const container = pod.containers[0];

  it("runs `railfence check --since <window> --json` daily, never overlapping, never retrying", () => {
    const cj = cronJob(objects)!;
    expect(cj.metadata.name).toBe("rf-railfence-audit");
    expect(cj.spec.schedule).toMatch(/^\d+ \d+ \* \* \*$/);
    expect(cj.spec.concurrencyPolicy).toBe("Forbid");
    expect(cj.spec.jobTemplate.spec.backoffLimit).toBe(0);
    expect(pod.restartPolicy).toBe("Never");
    expect(container.command).toEqual([
      "node",
      "--max-old-space-size=160",
      "dist/services/cli/main.js",
      "check",
      "--since",
      "25h",
      "--max-rows",
      "200",
      "--json",
    ]);
  });

  it("is a `check` invocation the CLI accepts: the command, its options and the window parse", () => {
    // After node, its heap limit and the entrypoint.
    const argv = container.command.slice(3) as string[];
    const line = parseLine(argv);
    const command = findCommand(line.positionals)!;
    expect(command.words).toEqual(["check"]);
    expect(line.positionals).toEqual(["check"]);
    const allowed = new Set<string>([...GLOBAL_OPTIONS, ...command.options]);
    expect(Object.keys(line.values).filter((o) => !allowed.has(o))).toEqual([]);
    const now = new Date("2030-01-02T03:04:05Z");
    expect(parseInstant("since", String(line.values.since), now)).toEqual(new Date(now.getTime() - 25 * 3_600_000));
    expect(
      render({ set: [...MINIMAL, "audit.window=49h", "audit.schedule=0 */12 * * *"] }).find((o) => o.kind === "CronJob" && component(o) === "audit")!.spec
        .jobTemplate.spec.template.spec.containers[0].command,
    ).toContain("49h");
  });

  it("reads paydb as the auditor's own login with its own password only, and the statement through the rail-proxy Service", () => {
    const env = containerEnv(pod, container, { ...renderedSecrets(objects), "db-auditor": { password: "pw" } }, mkdtempSync(join(dir, "env-")));
    const endpoints = resolveEndpoints({ flags: {}, env, cwd: dir });
    expect(endpoints.paydbAudit?.source).toBe("env");
    expect(new URL(endpoints.paydbAudit!.value).username).toBe("railfence_auditor_login");
    expect(new URL(endpoints.paydbAudit!.value).password).toBe("");
    const proxy = byKind(objects, "Service").find((s) => component(s) === "rail-proxy")!;
    const port = proxy.spec.ports.find((p: any) => p.name === "grpc").port;
    // Mutual TLS by default: the statement over https, as the auditor's certificate.
    expect(endpoints.railProxy).toEqual({ value: [`https://${proxy.metadata.name}:${port}`], source: "env" });
    expect(endpoints.tls?.source).toBe("env");
    expect(fileSource(pod, container, envOf(container).PAYDB_PASSWORD_FILE!)).toBe("db-auditor/password");
    const secrets = (pod.volumes ?? []).filter((v: any) => v.secret).map((v: any) => v.secret.secretName);
    expect(secrets).toEqual(["rf-railfence-audit-tls", "db-auditor"]);
    // Telemetry off explicitly (the NetworkPolicy gives it no collector), named as its component.
    expect(envOf(container)).toMatchObject({ OTEL_SDK_DISABLED: "true", OTEL_SERVICE_NAME: "audit" });
  });

  it("runs like every other pod: uid 10001, read-only root, no capabilities, its own ServiceAccount without a token", () => {
    expect(securityViolations([cronJob(objects)!])).toEqual([]);
    expect(pod.serviceAccountName).toBe("rf-railfence-audit");
    expect(pod.automountServiceAccountToken).toBe(false);
    const sa = byKind(objects, "ServiceAccount").find((s) => s.metadata.name === "rf-railfence-audit")!;
    expect(sa.automountServiceAccountToken).toBe(false);
    // The rail credential, the token-signing key, other components' passwords: none of them.
    expect(
      podSpecs([cronJob(objects)!])[0]!
        .spec.volumes.map((v: any) => v.name)
        .sort(),
    ).toEqual(["paydb-auditor-password", "tls", "tmp"]);
  });

  it("reaches rail-proxy, DNS and PostgreSQL only, serves nothing, and rail-proxy admits it", () => {
    const nps = byKind(objects, "NetworkPolicy");
    const np = nps.find((n) => n.spec.podSelector.matchLabels?.["app.kubernetes.io/component"] === "audit")!;
    expect(np.spec.policyTypes).toEqual(["Ingress", "Egress"]);
    expect(np.spec.ingress ?? []).toEqual([]);
    const rules = np.spec.egress.map((r: any) => ({
      to: r.to.map((p: any) => p.podSelector?.matchLabels?.["app.kubernetes.io/component"] ?? p.podSelector?.matchLabels?.["k8s-app"] ?? p.ipBlock?.cidr),
      ports: r.ports.map((p: any) => p.port),
    }));
    expect(rules).toEqual([
      { to: ["rail-proxy"], ports: [7200] },
      { to: ["kube-dns"], ports: [53, 53] },
      { to: ["10.0.0.0/8"], ports: [5432] },
    ]);
    const proxyNp = nps.find((n) => n.spec.podSelector.matchLabels?.["app.kubernetes.io/component"] === "rail-proxy")!;
    const callers = proxyNp.spec.ingress[0].from.map((p: any) => p.podSelector.matchLabels["app.kubernetes.io/component"]);
    expect(callers).toEqual(["executor", "reconciler", "audit"]);
  });

  it("presents its own certificate (identity auditor) under mutual TLS", () => {
    for (const [set, secret] of [
      [[], "rf-railfence-audit-tls"],
      [["tls.secrets.audit=auditor-cert"], "auditor-cert"],
    ] as const) {
      const tls = render({ set: [...OWN_SECRET, "tls.enabled=true", ...set] });
      const p = podOf(tls);
      const c = p.containers[0];
      expect(p.volumes.find((v: any) => v.name === "tls").secret.secretName).toBe(secret);
      expect(c.volumeMounts.find((m: any) => m.name === "tls")).toMatchObject({ mountPath: "/var/run/secrets/railfence/tls", readOnly: true });
      const env = containerEnv(
        p,
        c,
        { "db-auditor": { password: "pw" }, [secret]: { "tls.crt": "c", "tls.key": "k", "ca.crt": "a" } },
        mkdtempSync(join(dir, "tls-")),
      );
      const endpoints = resolveEndpoints({ flags: {}, env, cwd: dir });
      expect(endpoints.tls?.source).toBe("env");
      expect(endpoints.tls!.value.cert).toMatch(/\/var\/run\/secrets\/railfence\/tls\/tls\.crt$/);
      expect(endpoints.tls!.value.ca).toMatch(/ca\.crt$/);
      expect(endpoints.railProxy!.value[0]).toMatch(/^https:\/\//);
      // Server-side TLS settings are not the CLI's: nothing else is set.
      expect(Object.keys(envOf(c)).filter((k) => k.startsWith("TLS_") || k === "ALLOW_INSECURE")).toEqual([]);
    }
  });

  it("audit.enabled=false removes the CronJob, its ServiceAccount and NetworkPolicy, and rail-proxy's ingress for it", () => {
    const off = render({ set: [...MINIMAL, "audit.enabled=false"] });
    expect(cronJob(off)).toBeUndefined();
    expect(off.filter((o) => component(o) === "audit")).toEqual([]);
    const proxyNp = byKind(off, "NetworkPolicy").find((n) => n.spec.podSelector.matchLabels?.["app.kubernetes.io/component"] === "rail-proxy")!;
    expect(proxyNp.spec.ingress[0].from.map((p: any) => p.podSelector.matchLabels["app.kubernetes.io/component"])).toEqual(["executor", "reconciler"]);
    // The auditor's login is still provisioned: an operator may run `railfence check` by hand.
    const job = byKind(off, "Job").find((j) => component(j) === "migrate")!;
    const paydb = job.spec.template.spec.containers.find((c: any) => c.name === "migrate-paydb");
    expect(envOf(paydb).LOGIN_AUDITOR_USER).toBe("railfence_auditor_login");
  });

  it("the schema refuses a window the CLI would not parse, a retry setting and any free-form env (negative control: a good window renders)", () => {
    for (const set of ["audit.window=25 hours", "audit.window=0h", "audit.window=1w", "audit.backoffLimit=3", "audit.env.X=1", "audit.command[0]=sh"]) {
      const r = helm(templateArgs({ set: [...MINIMAL, set] }));
      expect(r.status, set).not.toBe(0);
      expect(r.stderr, set).toContain("values don't meet the specifications of the schema");
    }
    const ok = helm(templateArgs({ set: [...MINIMAL, "audit.window=7d"] }));
    expect(ok.stderr).toBe("");
    expect(ok.stdout).toContain('"--since", "7d"');
  });
});
