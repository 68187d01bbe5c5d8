/**
 * The container image and the drill, checked offline (there is no Docker engine here): the
 * Dockerfile's base is pinned, it runs as uid 10001, copies only files that exist and are in
 * the build context, never secrets; the drill script parses; the documented install commands
 * render with the chart.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { helm, root } from "./helm-tool.js";

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
    .map((part) => part.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]"))
    .join(".*");
  return new RegExp(`^${body.replace(/^\.\*\//, "(?:.*/)?")}$`);
}

/** Docker's rule: the last matching pattern wins; a pattern matching a parent excludes the child. */
function ignored(path: string, patterns = dockerignore): boolean {
  let out = false;
  const rules = patterns.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
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

  it("is multi-stage on a Node LTS base pinned by exact version", () => {
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const f of froms) expect(f).toMatch(/^node:(2[02468])\.\d+\.\d+-(bookworm|trixie)-slim(@sha256:[a-f0-9]{64})?$/);
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
    for (const p of [".git/config", "node_modules/pg/package.json", ".tools/x", "dist/services/x.js", "secrets/rail", "services/x/.env", "migrations/tls.key", "services/rail-proxy/rail-credential.txt"]) {
      expect(ignored(p), p).toBe(true);
    }
    for (const p of ["package.json", "package-lock.json", "tsconfig.build.json", "services/rail-proxy/main.ts", "migrations/paydb/001_payouts.sql"]) {
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
        const flags = stage[run]!.args.match(/npm ci([^&;|]*)/)![1]!.trim().split(/\s+/).filter((f) => f.startsWith("--"));
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

  it("every service the chart can start has a main.ts to compile", () => {
    for (const s of ["lock", "rail-proxy", "rail-stub", "payouts", "executor", "reconciler", "migrate"]) {
      expect(existsSync(join(root, "services", s, "main.ts")), `services/${s}/main.ts`).toBe(true);
    }
  });
});

describe("replica-kill drill", () => {
  const script = join(root, "deploy", "drills", "replica-kill.sh");
  const text = readFileSync(script, "utf8");

  it("is valid bash that force-kills rail-proxy pods and runs the checker", () => {
    const r = spawnSync("bash", ["-n", script], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(text).toContain("--grace-period=0 --force");
    expect(text).toContain("app.kubernetes.io/component=rail-proxy");
    expect(text).toContain("dist/services/harness/check.js");
    expect(text).toMatch(/set -euo pipefail/);
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
