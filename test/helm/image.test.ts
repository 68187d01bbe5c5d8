/**
 * The container image and the drill, checked offline (there is no Docker engine here): the
 * Dockerfile's base is pinned, it runs as uid 10001, copies only files that exist and are in
 * the build context, never secrets; the drill script parses and runs exactly the chart's audit
 * pod; the documented install commands render with the chart.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { helm, kubectlBinary, root } from "./helm-tool.js";
import { render, type K8sObject } from "./render.js";
import { auditJobPatch } from "../cluster/audit-job.js";

const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
const dockerignore = readFileSync(join(root, ".dockerignore"), "utf8");

interface Instruction {
  op: string;
  args: string;
}

/** Dockerfile instructions with line continuations joined and comments dropped. */
function instructions(text: string): Instruction[] {
  return text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

function globToRegex(glob: string): RegExp {
  const body = glob
    .replace(/\/$/, "")
    .split("**")
    .map((part) =>
      part
        .replace(/[.+^${}()|[\]\\]/g, "\\$&")
        .replace(/\*/g, "[^/]*")
        .replace(/\?/g, "[^/]"),
    )
    .join(".*");
  return new RegExp(`^${body.replace(/^\.\*\//, "(?:.*/)?")}$`);
}

/** Docker's rule: the last matching pattern wins; a pattern matching a parent excludes the child. */
function ignored(path: string, patterns = dockerignore): boolean {
  let out = false;
  const rules = patterns
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const prefixes = path.split("/").map((_, i, parts) => parts.slice(0, i + 1).join("/"));
  for (const rule of rules) {
    const negate = rule.startsWith("!");
    const re = globToRegex(negate ? rule.slice(1) : rule);
    if (prefixes.some((p) => re.test(p))) out = !negate;
  }
  return out;
}

/** Build stages: each FROM with the instructions up to the next one (global ARGs dropped). */
function stages(list: Instruction[]): Instruction[][] {
  const out: Instruction[][] = [];
  for (const i of list) {
    if (i.op === "FROM") out.push([i]);
    else out.at(-1)?.push(i);
  }
  return out;
}

function resolveArgs(text: string): Map<string, string> {
  const args = new Map<string, string>();
  for (const i of instructions(text)) if (i.op === "ARG" && i.args.includes("=")) args.set(i.args.split("=")[0]!, i.args.split("=").slice(1).join("="));
  return args;
}

describe("Dockerfile", () => {
  const ins = instructions(dockerfile);
  const args = resolveArgs(dockerfile);
  const froms = ins.filter((i) => i.op === "FROM").map((i) => i.args.split(/\s+/)[0]!.replace(/^\$\{(\w+)\}$/, (_, a: string) => args.get(a) ?? a));
  const finalStage = ins.slice(ins.map((i) => i.op).lastIndexOf("FROM"));

  it("is multi-stage on a Node LTS and a Debian slim base, each pinned by exact version", () => {
    const stageNames = new Set(
      ins
        .filter((i) => i.op === "FROM")
        .map((i) => i.args.split(/\s+AS\s+/i)[1])
        .filter(Boolean),
    );
    const bases = froms.filter((f) => !stageNames.has(f));
    expect(froms.length).toBeGreaterThanOrEqual(3);
    for (const f of bases) expect(f).toMatch(/^(node:(2[02468])\.\d+\.\d+-(bookworm|trixie)-slim|debian:(12|13)\.\d+-slim)(@sha256:[a-f0-9]{64})?$/);
    // The runtime takes only the node binary from the Node image: no npm, yarn or corepack.
    expect(froms.at(-1)).toMatch(/^debian:/);
    expect(finalStage.filter((i) => i.op === "COPY" && /--from=node\b/.test(i.args)).map((i) => i.args)).toEqual([
      "--from=node /usr/local/bin/node /usr/local/bin/node",
    ]);
  });

  it("builds with npm ci + npm run build and ships only production dependencies", () => {
    expect(ins.some((i) => i.op === "RUN" && /\bnpm ci\b/.test(i.args) && !/--omit=dev/.test(i.args))).toBe(true);
    expect(ins.some((i) => i.op === "RUN" && /\bnpm run build\b/.test(i.args))).toBe(true);
    expect(ins.some((i) => i.op === "RUN" && /\bnpm ci\b.*--omit=dev/.test(i.args))).toBe(true);
    const finalCopies = finalStage.filter((i) => i.op === "COPY").map((i) => i.args);
    expect(finalCopies.join("\n")).toMatch(/\/app\/dist/);
    expect(finalCopies.join("\n")).toMatch(/migrations/);
    expect(finalStage.some((i) => i.op === "RUN" && /npm (ci|install)\b(?!.*--omit=dev)/.test(i.args))).toBe(false);
  });

  it("runs the final stage as uid 10001, not root", () => {
    const users = finalStage.filter((i) => i.op === "USER").map((i) => i.args);
    expect(users.at(-1)).toMatch(/^10001(:10001)?$/);
    // Nothing after USER may switch back.
    expect(finalStage.slice(finalStage.findIndex((i) => i.op === "USER")).filter((i) => i.op === "USER")).toHaveLength(1);
  });

  it("copies only files that exist, are in the build context, and are not secrets", () => {
    const copies = ins.filter((i) => (i.op === "COPY" || i.op === "ADD") && !/--from=/.test(i.args));
    expect(copies.length).toBeGreaterThan(0);
    expect(ins.some((i) => i.op === "ADD")).toBe(false);
    for (const c of copies) {
      const parts = c.args.split(/\s+/).filter((p) => !p.startsWith("--"));
      for (const src of parts.slice(0, -1)) {
        expect(existsSync(join(root, src)), `COPY source ${src} exists`).toBe(true);
        expect(ignored(src.replace(/\/$/, "")), `COPY source ${src} is in the build context`).toBe(false);
        expect(src).not.toMatch(/\.env|\.pem$|\.key$|secret|credential|\.npmrc/i);
      }
    }
    expect(dockerfile).not.toMatch(/RAIL_CREDENTIALS|PASSWORD=|ENV .*SECRET/);
  });

  it("keeps secrets, git history and local state out of the build context", () => {
    for (const p of [
      ".git/config",
      "node_modules/pg/package.json",
      ".tools/x",
      "dist/services/x.js",
      "secrets/rail",
      "services/x/.env",
      "migrations/tls.key",
      "services/rail-proxy/rail-credential.txt",
    ]) {
      expect(ignored(p), p).toBe(true);
    }
    for (const p of [
      "package.json",
      "package-lock.json",
      "tsconfig.build.json",
      "tsconfig.image.json",
      "services/rail-proxy/main.ts",
      "services/shared/observability/instrumentation.ts",
      "migrations/paydb/001_payouts.sql",
    ]) {
      expect(ignored(p), p).toBe(false);
    }
    // Negative control: the matcher sees an include-everything file as excluding nothing.
    expect(ignored("secrets/rail", "# nothing\n")).toBe(false);
  });

  it("npm ci in each stage accepts the lockfile with only what that stage copies (no host .npmrc)", () => {
    // The build runs npm ci with the files COPYed into the stage so far and nothing else: no
    // project .npmrc unless COPYed, no developer config. Reproduced here offline (--dry-run
    // --offline needs no tarballs), so a lockfile made under settings the image does not share
    // (legacy-peer-deps, say) fails here rather than in a registry build.
    const npmCiStages = stages(ins).filter((s) => s.some((i) => i.op === "RUN" && /\bnpm ci\b/.test(i.args)));
    expect(npmCiStages.length).toBeGreaterThanOrEqual(2);
    for (const stage of npmCiStages) {
      const dir = mkdtempSync(join(tmpdir(), "npm-ci-"));
      try {
        const run = stage.findIndex((i) => i.op === "RUN" && /\bnpm ci\b/.test(i.args));
        for (const c of stage.slice(0, run).filter((i) => i.op === "COPY" && !/--from=/.test(i.args))) {
          const parts = c.args.split(/\s+/).filter((p) => !p.startsWith("--"));
          for (const src of parts.slice(0, -1)) cpSync(join(root, src), join(dir, src), { recursive: true });
        }
        const flags = stage[run]!.args.match(/npm ci([^&;|]*)/)![1]!
          .trim()
          .split(/\s+/)
          .filter((f) => f.startsWith("--"));
        const [user, global] = [join(dir, ".user-npmrc"), join(dir, ".global-npmrc")];
        writeFileSync(user, "");
        writeFileSync(global, "");
        const r = spawnSync("npm", ["ci", ...flags, "--dry-run", "--offline"], {
          cwd: dir,
          encoding: "utf8",
          env: { PATH: process.env.PATH, HOME: dir, npm_config_userconfig: user, npm_config_globalconfig: global, npm_config_cache: join(dir, ".npm") },
        });
        expect(r.stderr, `${stage[0]!.args}: npm ci ${flags.join(" ")}`).not.toMatch(/Missing: |ERESOLVE|EUSAGE/);
        expect(r.status, r.stderr).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it("starts telemetry before the application in every process the image runs", () => {
    const env = finalStage
      .filter((i) => i.op === "ENV")
      .map((i) => i.args)
      .join(" ");
    const m = env.match(/NODE_OPTIONS="([^"]*)"/);
    expect(m, "the final stage sets NODE_OPTIONS").not.toBeNull();
    const imported = m![1]!.match(/--import[= ](\S+)/)?.[1];
    expect(imported).toBe("/app/dist/services/shared/observability/instrumentation.js");
    // The module is part of the product build, and loading it that way really starts the SDK
    // when OTEL_* asks for it (and only then).
    const local = join(root, imported!.replace(/^\/app\//, ""));
    expect(existsSync(local), `${local} (npm run build)`).toBe(true);
    const telemetry = join(root, "dist", "services", "shared", "observability", "telemetry.js");
    const probe = (nodeOptions: string | undefined, extra: Record<string, string>) =>
      // The same module instance the preload started (one ESM cache per process), asked whether it did.
      spawnSync(
        process.execPath,
        ["--input-type=module", "-e", `const t = await import(${JSON.stringify(pathToFileURL(telemetry).href)}); console.log(t.tracingOn())`],
        {
          encoding: "utf8",
          env: { PATH: process.env.PATH, ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}), ...extra },
        },
      ).stdout.trim();
    const options = m![1]!.replace(imported!, local);
    const otlp = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", OTEL_SERVICE_NAME: "probe" };
    expect(probe(options, otlp)).toBe("true");
    expect(probe(options, { ...otlp, OTEL_SDK_DISABLED: "true" })).toBe("false");
    // Negative control: without NODE_OPTIONS nothing starts, whatever OTEL_* says.
    expect(probe(undefined, otlp)).toBe("false");
  });

  it("compiles the product without the development harness or tests", () => {
    expect(ignored("tools/harness/mesh.ts")).toBe(true);
    expect(ignored("tools/harness")).toBe(true);
    expect(ignored("tools")).toBe(true);
    expect(ignored("test/support/clients.ts")).toBe(true);
    expect(ignored("services/rail-proxy/admission.test.ts")).toBe(true);
    const build = ins.find((i) => i.op === "RUN" && /\bnpm run build:image\b/.test(i.args));
    expect(build, "the build stage compiles with tsconfig.image.json").toBeDefined();
    // And proves it: the build stage fails if anything of the harness or the tests was compiled.
    expect(build!.args).toContain("test ! -e dist/tools");
    // What tsc would compile for the image, imports followed: a product file importing the
    // harness would drag it in (tsconfig excludes only stop the initial file list).
    const listed = (tsconfig: string) => {
      const r = spawnSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(root, tsconfig), "--listFilesOnly"], {
        encoding: "utf8",
      });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout
        .split("\n")
        .map((f) => f.trim())
        .filter((f) => f.startsWith(`${root}/`) && !f.includes("/node_modules/"));
    };
    const notProduct = (files: string[]) =>
      files.filter(
        (f) => !(f.startsWith(`${join(root, "services")}/`) || f.startsWith(`${join(root, "clients", "typescript", "src")}/`)) || f.endsWith(".test.ts"),
      );
    const files = listed("tsconfig.image.json");
    expect(files.filter((f) => f.startsWith(`${join(root, "services")}/`)).length).toBeGreaterThan(50);
    expect(notProduct(files)).toEqual([]);
    // Negative control: the development build (tsconfig.build.json) does compile the harness, and
    // the same filter sees it.
    const dev = notProduct(listed("tsconfig.build.json"));
    expect(dev.some((f) => f.startsWith(`${join(root, "tools", "harness")}/`))).toBe(true);
  });

  it("passes the registry CA only as a build secret: never copied, never in the runtime stage", () => {
    for (const i of ins) {
      if (i.op === "COPY" || i.op === "ADD") expect(i.args).not.toMatch(/\.crt|\.pem|ca-certificates|cafile/i);
      if (i.op === "ENV") expect(i.args).not.toMatch(/NODE_EXTRA_CA_CERTS|cafile/i);
    }
    const caSteps = ins.filter((i) => /build_ca/.test(i.args));
    expect(caSteps.length).toBeGreaterThan(0);
    for (const i of caSteps) expect(i.args).toMatch(/^--mount=type=secret,id=build_ca,/);
    expect(finalStage.some((i) => /--mount|build_ca|NODE_EXTRA_CA_CERTS/.test(i.args))).toBe(false);
  });

  it("every service the chart can start has a main.ts to compile", () => {
    for (const s of ["lock", "rail-proxy", "rail-stub", "payouts", "executor", "reconciler", "migrate"]) {
      expect(existsSync(join(root, "services", s, "main.ts")), `services/${s}/main.ts`).toBe(true);
    }
  });
});

describe("replica-kill drill", () => {
  const script = join(root, "deploy", "drills", "replica-kill.sh");
  const text = readFileSync(script, "utf8");

  /**
   * The JSON patch the script applies to the audit CronJob's Job: deploy/drills/audit-job-patch.sh
   * over the CronJob's command, as check_job_patch in the script feeds it (and test/cluster does).
   */
  function checkJobPatch(cronJob: K8sObject, since: string, runId: string): unknown[] {
    return JSON.parse(auditJobPatch(cronJob.spec.jobTemplate.spec.template.spec.containers[0].command, since, runId)) as unknown[];
  }

  /** The construction the drill and the cluster test carried before: fixed positions (node, heap flag, entrypoint). */
  function positionalPatch(since: string, runId: string): unknown[] {
    const c = "/spec/template/spec/containers/0/command";
    return [
      { op: "test", path: `${c}/3`, value: "check" },
      { op: "test", path: `${c}/4`, value: "--since" },
      { op: "replace", path: `${c}/5`, value: since },
      { op: "add", path: `${c}/-`, value: "--quiescent" },
      { op: "add", path: "/metadata/labels/railfence.dev~1drill", value: runId },
    ];
  }

  /** The audit CronJob with `flag` put right after `node` (a harmless new node flag). */
  function withLeadingFlag(cronJob: K8sObject, flag: string): K8sObject {
    const cj = structuredClone(cronJob);
    cj.spec.jobTemplate.spec.template.spec.containers[0].command.splice(1, 0, flag);
    return cj;
  }

  /** What `kubectl create job --from=cronjob/<name>` makes of a CronJob (labels, annotations, spec). */
  function jobFrom(cronJob: K8sObject, name: string): K8sObject {
    const tpl = cronJob.spec.jobTemplate;
    return {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name, labels: tpl.metadata.labels, annotations: { "cronjob.kubernetes.io/instantiate": "manual" } },
      spec: tpl.spec,
    };
  }

  /** `kubectl patch --local` (no cluster), as the script runs it. */
  function patchLocally(job: K8sObject, patch: unknown[]): { status: number; job?: K8sObject; stderr: string } {
    const dir = mkdtempSync(join(tmpdir(), "drill-patch-"));
    try {
      writeFileSync(join(dir, "job.json"), JSON.stringify(job));
      const r = spawnSync(kubectlBinary(), ["patch", "--local", "-f", join(dir, "job.json"), "--type=json", "-p", JSON.stringify(patch), "-o", "json"], {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", KUBECONFIG: join(dir, "none") },
      });
      return { status: r.status ?? -1, stderr: r.stderr, ...(r.status === 0 ? { job: JSON.parse(r.stdout) as K8sObject } : {}) };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it("is valid bash that force-kills rail-proxy pods and takes its verdict from the release's audit CronJob", () => {
    const r = spawnSync("bash", ["-n", script], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(text).toContain("--grace-period=0 --force");
    expect(text).toContain("app.kubernetes.io/component=rail-proxy");
    expect(text).toContain('create job "$RUN_ID-check" --from="cronjob/$AUDIT_CRONJOB"');
    expect(text).toContain("app.kubernetes.io/component=audit");
    expect(text).toMatch(/set -euo pipefail/);
    // Nothing from a checkout reaches the cluster: the product image holds the audit.
    expect(text).not.toMatch(/harness|--from-file|CHECKER_DIR|PAYDB_URL|RAILDB_URL/);
  });

  const auditCronJob = () =>
    render({ set: ["railStub.enabled=true"] }).find((o) => o.kind === "CronJob" && o.metadata.labels?.["app.kubernetes.io/component"] === "audit")!;

  /** The CronJob's own command with the drill's window and --quiescent: what the drill must run. */
  const drillCommand = (cronJob: K8sObject, since: string) => {
    const command = [...(cronJob.spec.jobTemplate.spec.template.spec.containers[0].command as string[])];
    command[command.indexOf("check") + 2] = since;
    return [...command, "--quiescent"];
  };

  it("runs exactly the audit CronJob's pod, with --quiescent and the drill's start as --since", () => {
    const cron = auditCronJob();
    const before = jobFrom(cron, "drill-1-check");
    const r = patchLocally(before, checkJobPatch(cron, "2030-01-02T03:04:05Z", "drill-1"));
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const pod = r.job!.spec.template.spec;
    expect(pod.containers[0].command).toEqual([
      "node",
      "--max-old-space-size=160",
      "dist/services/cli/main.js",
      "check",
      "--since",
      "2030-01-02T03:04:05Z",
      "--max-rows",
      "200",
      "--json",
      "--quiescent",
    ]);
    expect(r.job!.metadata.labels).toMatchObject({ "railfence.dev/drill": "drill-1", "app.kubernetes.io/component": "audit" });
    // Everything else is the CronJob's own pod: env, mounts, identity, security, labels (NetworkPolicy).
    const { command: _a, ...container } = pod.containers[0];
    const { command: _b, ...original } = before.spec.template.spec.containers[0];
    expect(container).toEqual(original);
    expect({ ...pod, containers: [] }).toEqual({ ...before.spec.template.spec, containers: [] });
    expect(r.job!.spec.template.metadata).toEqual(before.spec.template.metadata);
    expect(r.job!.spec.backoffLimit).toBe(0);
  });

  it("finds `check` by value: a new node flag before the entrypoint changes nothing", () => {
    for (const flag of ["--enable-source-maps", "--stack-size=2048"]) {
      const cron = withLeadingFlag(auditCronJob(), flag);
      const r = patchLocally(jobFrom(cron, "drill-3-check"), checkJobPatch(cron, "2030-01-02T03:04:05Z", "drill-3"));
      expect(r.stderr).toBe("");
      expect(r.job!.spec.template.spec.containers[0].command).toEqual(drillCommand(cron, "2030-01-02T03:04:05Z"));
    }
  });

  it("negative control: a positional construction held with today's command and breaks on a leading flag", () => {
    const today = auditCronJob();
    const held = patchLocally(jobFrom(today, "drill-4-check"), positionalPatch("2030-01-02T03:04:05Z", "drill-4"));
    expect(held.job!.spec.template.spec.containers[0].command).toEqual(drillCommand(today, "2030-01-02T03:04:05Z"));
    const flagged = withLeadingFlag(today, "--enable-source-maps");
    const broken = patchLocally(jobFrom(flagged, "drill-4-check"), positionalPatch("2030-01-02T03:04:05Z", "drill-4"));
    expect(broken.status).not.toBe(0);
    expect(broken.stderr).toContain("test failed");
  });

  it("refuses a CronJob whose command has another shape (negative control): nothing audits the wrong window", () => {
    const cron = structuredClone(auditCronJob());
    const other = ["node", "--max-old-space-size=160", "dist/services/cli/main.js", "check", "--json", "--since", "25h"];
    cron.spec.jobTemplate.spec.template.spec.containers[0].command = other;
    expect(() => checkJobPatch(cron, "2030-01-02T03:04:05Z", "drill-2")).toThrow(/not followed by '--since <window>'/);
    const none = structuredClone(cron);
    none.spec.jobTemplate.spec.template.spec.containers[0].command = ["node", "dist/services/cli/main.js", "reconcile"];
    expect(() => checkJobPatch(none, "2030-01-02T03:04:05Z", "drill-2")).toThrow(/no 'check'/);
    // And a patch made for one command is refused by kubectl on a Job with another.
    const today = auditCronJob();
    const r = patchLocally(jobFrom(withLeadingFlag(today, "--enable-source-maps"), "drill-2-check"), checkJobPatch(today, "2030-01-02T03:04:05Z", "drill-2"));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("test failed");
  });

  it("feeds the patch script the audit CronJob's command as the cluster holds it", () => {
    expect(text).toContain("audit-job-patch.sh");
    expect(text).toMatch(/get cronjob "\$AUDIT_CRONJOB"[\s\S]*containers\[0\]\.command\[\*\]/);
  });

  it("bash -n does fail on a broken script (negative control)", () => {
    const dir = mkdtempSync(join(tmpdir(), "drill-"));
    try {
      writeFileSync(join(dir, "broken.sh"), text.replace(/\nfi\n/, "\n"));
      expect(spawnSync("bash", ["-n", join(dir, "broken.sh")]).status).not.toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("docs/deploy.md", () => {
  const doc = readFileSync(join(root, "docs", "deploy.md"), "utf8");

  /** `helm install|upgrade railfence deploy/helm/railfence ...` commands, continuations joined. */
  const commands = doc
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /^helm (install|upgrade( --install)?) railfence deploy\/helm\/railfence\b/.test(l));

  it("documents GKE and EKS installs whose values render with the chart", () => {
    expect(commands.some((c) => c.includes("values-gke.yaml"))).toBe(true);
    expect(commands.some((c) => c.includes("values-eks.yaml"))).toBe(true);
    for (const c of commands) {
      const words = c.split(/\s+/);
      const args = ["template", "railfence", join(root, "deploy/helm/railfence")];
      // `--reuse-values` upgrades an install made by one of the commands above: its values.
      if (words.includes("--reuse-values")) args.push("-f", join(root, "deploy/helm/railfence/values-gke.yaml"));
      for (let i = 0; i < words.length; i++) {
        if (words[i] === "-f" || words[i] === "--values") args.push("-f", join(root, words[++i]!));
        if (words[i] === "--set" || words[i] === "--set-string") args.push(words[i]!, words[++i]!.replace(/^'|'$/g, ""));
      }
      const r = helm(args);
      expect(r.stderr, c).toBe("");
      expect(r.status, c).toBe(0);
    }
  });

  it("covers prerequisites, credential rotation and the drill", () => {
    expect(doc).toMatch(/PRIMARY/);
    expect(doc).toMatch(/read replica/i);
    expect(doc).toContain("rollout restart deployment/railfence-rail-proxy");
    expect(doc).toContain("deploy/drills/replica-kill.sh");
  });
});
