/**
 * A thin, typed wrapper over the podman CLI for the container smoke test. Every call goes
 * through the containers.conf that deploy/image/build.sh wrote (runc, cgroupfs, rlimits within
 * this machine's hard limits), or the CONTAINERS_CONF the caller set. Nothing here knows about
 * railfence: chart-pods.ts turns rendered pod specs into the options below.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { root } from "../helm/helm-tool.js";

const run = promisify(execFile);

function podmanEnv(): NodeJS.ProcessEnv {
  const conf = process.env.CONTAINERS_CONF ?? join(root, ".tools", "containers", "containers.conf");
  if (!existsSync(conf)) throw new Error(`${conf} is missing: run deploy/image/build.sh first (npm run test:image does)`);
  return { ...process.env, CONTAINERS_CONF: conf };
}

/** Runs podman; resolves with stdout, rejects with stderr in the message. */
export async function podman(args: string[], opts: { timeoutMs?: number } = {}): Promise<string> {
  try {
    const { stdout } = await run("podman", args, { env: podmanEnv(), maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 120_000 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`podman ${args.slice(0, 3).join(" ")} ...: ${e.stderr?.trim() || e.message}`);
  }
}

export interface Mount {
  hostPath: string;
  containerPath: string;
  readOnly: boolean;
}

/** What one container needs; every field maps to one podman run flag. */
export interface ContainerOptions {
  name: string;
  image: string;
  command: string[];
  env: Record<string, string>;
  network: string;
  /** DNS names other containers reach this one by (a Kubernetes Service name). */
  aliases?: string[];
  hostname?: string;
  /** "uid:gid" */
  user?: string;
  readOnlyRootFs?: boolean;
  dropAllCapabilities?: boolean;
  noNewPrivileges?: boolean;
  tmpfs?: Array<{ path: string; sizeBytes?: number }>;
  mounts?: Mount[];
  memoryBytes?: number;
  cpus?: number;
  /** Restart whenever the process exits (a Deployment pod's restartPolicy: Always). */
  restartAlways?: boolean;
}

export function runArgs(o: ContainerOptions): string[] {
  // Images are built here, never pulled: no registry is needed (or reachable).
  const a = ["--name", o.name, "--pull", "never", "--network", o.network, "--log-driver", "k8s-file"];
  for (const alias of o.aliases ?? []) a.push("--network-alias", alias);
  if (o.hostname) a.push("--hostname", o.hostname);
  if (o.user) a.push("--user", o.user);
  if (o.readOnlyRootFs) a.push("--read-only", "--read-only-tmpfs=false");
  if (o.dropAllCapabilities) a.push("--cap-drop", "ALL");
  if (o.noNewPrivileges) a.push("--security-opt", "no-new-privileges");
  for (const t of o.tmpfs ?? []) a.push("--tmpfs", `${t.path}:rw,mode=1777${t.sizeBytes ? `,size=${t.sizeBytes}` : ""}`);
  for (const m of o.mounts ?? []) a.push("--volume", `${m.hostPath}:${m.containerPath}:${m.readOnly ? "ro" : "rw"}`);
  if (o.memoryBytes) a.push("--memory", String(o.memoryBytes));
  if (o.cpus) a.push("--cpus", String(o.cpus));
  if (o.restartAlways) a.push("--restart", "always");
  // Env values may hold anything but never secrets (those are files): pass them as flags.
  for (const [k, v] of Object.entries(o.env)) a.push("--env", `${k}=${v}`);
  return [...a, o.image, ...o.command];
}

/** Starts a container in the background. */
export async function runDetached(o: ContainerOptions): Promise<void> {
  await podman(["run", "--detach", ...runArgs(o)]);
}

/** Runs a container to completion; resolves with its exit code and output. */
export function runToExit(o: ContainerOptions, timeoutMs = 120_000): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    // A one-shot run is never restarted (a Job pod's restartPolicy: Never).
    const child = spawn("podman", ["run", "--rm", ...runArgs({ ...o, restartAlways: false })], { env: podmanEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => (output += d.toString("utf8")));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${o.name} did not exit within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

export interface ContainerState {
  running: boolean;
  exitCode: number;
  ip: string;
  /** Host pid of the container's process 1 (0 when not running). */
  pid: number;
  restartCount: number;
}

export async function inspect(name: string): Promise<ContainerState> {
  const [c] = JSON.parse(await podman(["container", "inspect", name])) as Array<{
    State: { Running: boolean; ExitCode: number; Pid: number };
    RestartCount: number;
    NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
  }>;
  const ip = Object.values(c!.NetworkSettings.Networks ?? {})[0]?.IPAddress ?? "";
  return { running: c!.State.Running, exitCode: c!.State.ExitCode, ip, pid: c!.State.Pid, restartCount: c!.RestartCount ?? 0 };
}

/** The raw inspect document (security options, mounts, user...) for assertions. */
export async function inspectRaw(name: string): Promise<Record<string, any>> {
  return (JSON.parse(await podman(["container", "inspect", name])) as Array<Record<string, any>>)[0]!;
}

export async function logs(name: string): Promise<string> {
  const { stdout, stderr } = await run("podman", ["logs", name], { env: podmanEnv(), maxBuffer: 64 * 1024 * 1024 }).catch(() => ({ stdout: "", stderr: "" }));
  return stdout + stderr;
}

/** SIGTERM, then SIGKILL after graceSeconds (a kubelet stopping a pod); resolves with the exit code. */
export async function stop(name: string, graceSeconds: number): Promise<number> {
  await podman(["stop", "--time", String(graceSeconds), name], { timeoutMs: (graceSeconds + 30) * 1000 });
  return (await inspect(name)).exitCode;
}

/** Removes containers (killing what runs, no grace); missing ones are ignored. */
export async function remove(names: string[]): Promise<void> {
  if (names.length === 0) return;
  await podman(["rm", "--force", "--ignore", "--time", "0", ...names], { timeoutMs: 600_000 }).catch(() => {});
}

/** An internal bridge network (no route out); returns the host's address on it. */
export async function createNetwork(name: string): Promise<{ gateway: string }> {
  await podman(["network", "create", "--internal", name]);
  const [n] = JSON.parse(await podman(["network", "inspect", name])) as Array<{ subnets: Array<{ gateway: string }> }>;
  return { gateway: n!.subnets[0]!.gateway };
}

export async function removeNetwork(name: string): Promise<void> {
  await podman(["network", "rm", "--force", name]).catch(() => {});
}
