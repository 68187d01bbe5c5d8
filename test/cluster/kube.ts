/**
 * Driving the test cluster from a program: the cluster's own kubectl (built with it) and the
 * chart's Helm binary, both against the kubeconfig that deploy/cluster/up.sh wrote, plus the
 * waits every step needs. Nothing here knows about railfence; profile.ts and run.ts do.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { helm as helmRaw, helmAsync, root } from "../helm/helm-tool.js";
import { eventually } from "../support/time.js";

export { root };
export const clusterDir = join(root, "deploy", "cluster");

/** What up.sh wrote to .cluster/run/cluster.json. */
export interface ClusterInfo {
  kubernetesVersion: string;
  kubeconfig: string;
  kubectl: string;
  node: string;
  nodeIp: string;
  podCidr: string;
  containerdAddress: string;
  stepsFile: string;
}

export function clusterState(): string {
  return process.env.CLUSTER_STATE ?? join(root, ".cluster");
}

export function readClusterInfo(): ClusterInfo {
  return JSON.parse(readFileSync(join(clusterState(), "run", "cluster.json"), "utf8")) as ClusterInfo;
}

export interface Run {
  status: number;
  stdout: string;
  stderr: string;
}

export class Kube {
  constructor(readonly info: ClusterInfo) {}

  get env(): Record<string, string> {
    return { KUBECONFIG: this.info.kubeconfig };
  }

  /** kubectl with args; never throws (callers assert). */
  kubectl(args: string[], input?: string): Run {
    const r = spawnSync(this.info.kubectl, args, {
      encoding: "utf8",
      input,
      env: { ...process.env, ...this.env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return { status: r.status ?? -1, stdout: r.stdout ?? "", stderr: r.stderr ?? (r.error ? String(r.error) : "") };
  }

  /** kubectl that must succeed; returns stdout. */
  must(args: string[], input?: string): string {
    const r = this.kubectl(args, input);
    if (r.status !== 0) throw new Error(`kubectl ${args.join(" ")} failed (${r.status}): ${r.stderr.trim() || r.stdout.trim()}`);
    return r.stdout;
  }

  /** kubectl ... -o json, parsed. */
  json<T = KubeList>(args: string[]): T {
    return JSON.parse(this.must([...args, "-o", "json"])) as T;
  }

  /** Async kubectl, for commands that run while the program keeps watching (drain). */
  kubectlAsync(args: string[]): Promise<Run> {
    return new Promise((resolve) => {
      const child = spawn(this.info.kubectl, args, { env: { ...process.env, ...this.env } });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("close", (code) => resolve({ status: code ?? -1, stdout, stderr }));
    });
  }

  helm(args: string[]): Run {
    return helmRaw(args, this.env);
  }

  /** helm without blocking this process (its load clients keep running meanwhile). */
  helmAsync(args: string[]): Promise<Run> {
    return helmAsync(args, this.env);
  }

  /** helm that must succeed. */
  mustHelm(args: string[]): string {
    const r = this.helm(args);
    if (r.status !== 0) throw new Error(`helm ${args[0]} failed (${r.status}): ${r.stderr.trim()}`);
    return r.stdout;
  }
}

export interface KubeObject {
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
    deletionGracePeriodSeconds?: number;
    uid?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export interface KubeList<T = KubeObject> {
  items: T[];
}

export interface Pod extends KubeObject {
  spec: { nodeName?: string; containers: Array<{ name: string; image: string }> };
  status: {
    phase?: string;
    podIP?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ name: string; ready: boolean; restartCount: number; imageID?: string; image?: string }>;
  };
}

export const podReady = (p: Pod): boolean => p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls fn until it returns a truthy value; throws with `what` after timeoutMs. */
export async function until<T>(fn: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs: number, everyMs = 1000): Promise<T> {
  return eventually(fn, what, { timeoutMs, everyMs });
}

/** Runs a shell script from the repository with extra env; output streams to ours and is returned. */
export function runScript(script: string, args: string[], env: Record<string, string>, log: (line: string) => void): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn("bash", [script, ...args], { cwd: root, env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    const pipe = (buf: Buffer, into: "out" | "err") => {
      const text = buf.toString();
      if (into === "out") stdout += text;
      else stderr += text;
      for (const line of text.split("\n")) if (line.trim()) log(line);
    };
    child.stdout.on("data", (d: Buffer) => pipe(d, "out"));
    child.stderr.on("data", (d: Buffer) => pipe(d, "err"));
    child.on("close", (code) => resolve({ status: code ?? -1, stdout, stderr }));
  });
}

/** When a pod was asked to stop (deletionTimestamp) and when it was last seen, by polling. */
export interface PodLife {
  name: string;
  component: string;
  stopAsked?: number;
  lastSeen: number;
}

/**
 * Polls the pods matching a selector every second, without blocking the process, so that a
 * check can later ask which pods were stopping at a given moment (a rolling upgrade).
 */
export class PodWatcher {
  readonly pods = new Map<string, PodLife>();
  private running = true;
  private loop: Promise<void>;

  constructor(kube: Kube, namespace: string, selector: string) {
    this.loop = (async () => {
      while (this.running) {
        const r = await kube.kubectlAsync(["-n", namespace, "get", "pods", "-l", selector, "-o", "json"]);
        const now = Date.now();
        if (r.status === 0) {
          for (const p of (JSON.parse(r.stdout) as KubeList<Pod>).items) {
            const life = this.pods.get(p.metadata.name) ?? {
              name: p.metadata.name,
              component: p.metadata.labels?.["app.kubernetes.io/component"] ?? "?",
              lastSeen: now,
            };
            life.lastSeen = now;
            // deletionTimestamp is when the grace period ENDS (the API server sets it to the
            // request time plus deletionGracePeriodSeconds): the request was that much earlier.
            if (p.metadata.deletionTimestamp && life.stopAsked === undefined)
              life.stopAsked = Date.parse(p.metadata.deletionTimestamp) - 1000 * (p.metadata.deletionGracePeriodSeconds ?? 0);
            this.pods.set(p.metadata.name, life);
          }
        }
        await sleep(1000);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** Pods of a component that had been asked to stop and were still there around `at` (± slackMs). */
  stoppingAt(component: string, at: number, slackMs: number): PodLife[] {
    return [...this.pods.values()].filter(
      (p) => p.component === component && p.stopAsked !== undefined && p.stopAsked - slackMs <= at && at <= p.lastSeen + 1000 + slackMs,
    );
  }
}
