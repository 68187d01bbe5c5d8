/**
 * Runs the rendered chart's pods as containers, as a kubelet would run them: the container's
 * command and environment (fieldRefs and $(VAR) references resolved the Kubernetes way), the
 * pod and container securityContext (user, read-only root, capabilities, no privilege
 * escalation), emptyDirs as tmpfs, Secret volumes as read-only files owned by the fsGroup with
 * the volume's mode, memory and CPU limits, and the Service name as a network alias. What cannot
 * be expressed with podman fails loudly rather than being skipped.
 */
import { chmodSync, chownSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { byKind, podSpecs, type K8sObject } from "../helm/render.js";
import type { ContainerOptions } from "./podman.js";

/** One container of one workload, with what is needed to run and probe it. */
export interface ChartContainer {
  /** Deployment, Job or CronJob. */
  kind: string;
  workload: string;
  component: string;
  /** Deployment replicas (1 for jobs). */
  replicas: number;
  /** The Service that selects the component, if any (its name is a DNS alias). */
  serviceName: string | undefined;
  /** Init containers run first, in order (the migration Job). */
  init: boolean;
  podSpec: any;
  container: any;
}

export function chartContainers(objects: K8sObject[]): ChartContainer[] {
  const services = byKind(objects, "Service").filter((s) => s.spec?.clusterIP !== "None");
  const out: ChartContainer[] = [];
  for (const p of podSpecs(objects)) {
    const serviceName = services.find((s) => s.spec?.selector?.["app.kubernetes.io/component"] === p.component)?.metadata.name;
    const replicas = p.owner.kind === "Deployment" ? (p.owner.spec?.replicas ?? 1) : 1;
    for (const [list, init] of [[p.spec.initContainers ?? [], true], [p.spec.containers ?? [], false]] as const) {
      for (const container of list) out.push({ kind: p.owner.kind, workload: p.owner.metadata.name, component: p.component, replicas, serviceName, init, podSpec: p.spec, container });
    }
  }
  return out;
}

export function find(all: ChartContainer[], kind: string, comp: string): ChartContainer[] {
  const found = all.filter((c) => c.kind === kind && c.component === comp);
  if (found.length === 0) throw new Error(`the chart renders no ${kind} for ${comp}`);
  return found;
}

/** Kubernetes quantities: "256Mi" -> bytes, "500m" -> 0.5 cpus. */
export function memoryBytes(q: string | undefined): number | undefined {
  if (!q) return undefined;
  const m = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(q);
  if (!m) throw new Error(`memory quantity ${q}`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ""] ?? 1;
  return Number(m[1]) * unit;
}

export function cpus(q: string | number | undefined): number | undefined {
  if (q === undefined) return undefined;
  const s = String(q);
  return s.endsWith("m") ? Number(s.slice(0, -1)) / 1000 : Number(s);
}

/** $(VAR) of earlier variables expanded, $$ escaped, unknown references left as they are. */
export function expandK8s(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string | undefined) => (m === "$$" ? "$" : name !== undefined && name in vars ? vars[name]! : m));
}

/** The container's environment as the kubelet computes it. */
export function resolveEnv(env: any[], fieldRefs: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of env ?? []) {
    if (e.valueFrom) {
      const path = e.valueFrom.fieldRef?.fieldPath;
      if (!path || !(path in fieldRefs)) throw new Error(`env ${e.name}: valueFrom ${JSON.stringify(e.valueFrom)} is not supported here`);
      out[e.name] = fieldRefs[path]!;
    } else {
      out[e.name] = expandK8s(String(e.value ?? ""), out);
    }
  }
  return out;
}

export interface PodContext {
  podName: string;
  image: string;
  network: string;
  namespace: string;
  nodeName: string;
  /** Where this run materialises Secret volumes (a private temp dir). */
  secretsDir: string;
  secrets: Record<string, Record<string, string>>;
  extraEnv?: Record<string, string>;
}

/** Writes one Secret volume the way the kubelet projects it: items only, mode, group = fsGroup. */
function materialiseSecret(volume: any, dir: string, secrets: Record<string, Record<string, string>>, fsGroup: number | undefined): void {
  const data = secrets[volume.secret.secretName];
  if (!data) throw new Error(`Secret ${volume.secret.secretName} (volume ${volume.name}) has no content in the test's secrets table`);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const items: Array<{ key: string; path: string }> = volume.secret.items ?? Object.keys(data).map((k) => ({ key: k, path: k }));
  for (const item of items) {
    const value = data[item.key];
    if (value === undefined) throw new Error(`Secret ${volume.secret.secretName} has no key ${item.key}`);
    const file = join(dir, item.path);
    writeFileSync(file, value);
    chmodSync(file, volume.secret.defaultMode ?? 0o644);
    if (fsGroup !== undefined) chownSync(file, 0, fsGroup);
  }
}

/** podman options for one chart container in pod ctx.podName. */
export function containerOptions(c: ChartContainer, ctx: PodContext): ContainerOptions {
  const pod = c.podSpec.securityContext ?? {};
  const sc = { ...pod, ...(c.container.securityContext ?? {}) };
  if (sc.privileged) throw new Error(`${c.workload}/${c.container.name}: privileged`);
  const uid: number | undefined = sc.runAsUser;
  const gid: number | undefined = sc.runAsGroup ?? uid;
  if (sc.runAsNonRoot && (uid === undefined || uid === 0)) throw new Error(`${c.workload}/${c.container.name}: runAsNonRoot without a non-root runAsUser`);
  const drop: string[] = sc.capabilities?.drop ?? [];
  if ((sc.capabilities?.add ?? []).length > 0) throw new Error(`${c.workload}/${c.container.name}: adds capabilities`);

  const tmpfs: ContainerOptions["tmpfs"] = [];
  const mounts: ContainerOptions["mounts"] = [];
  for (const m of c.container.volumeMounts ?? []) {
    const v = (c.podSpec.volumes ?? []).find((x: any) => x.name === m.name);
    if (!v) throw new Error(`${c.workload}/${c.container.name}: volumeMount ${m.name} has no volume`);
    if (v.emptyDir) {
      tmpfs.push({ path: m.mountPath, sizeBytes: memoryBytes(v.emptyDir.sizeLimit) });
    } else if (v.secret) {
      const dir = join(ctx.secretsDir, ctx.podName, v.name);
      materialiseSecret(v, dir, ctx.secrets, pod.fsGroup);
      // Secret volumes are read-only whatever the mount says.
      mounts.push({ hostPath: dir, containerPath: m.mountPath, readOnly: true });
    } else {
      throw new Error(`${c.workload}/${c.container.name}: volume ${m.name} of this type is not supported here`);
    }
  }

  const fieldRefs = { "metadata.name": ctx.podName, "metadata.namespace": ctx.namespace, "spec.nodeName": ctx.nodeName };
  const limits = c.container.resources?.limits ?? {};
  return {
    name: ctx.podName,
    image: ctx.image,
    command: [...(c.container.command ?? []), ...(c.container.args ?? [])],
    env: { ...resolveEnv(c.container.env ?? [], fieldRefs), ...(ctx.extraEnv ?? {}) },
    network: ctx.network,
    aliases: c.serviceName ? [c.serviceName] : [],
    hostname: ctx.podName,
    user: uid !== undefined ? `${uid}:${gid}` : undefined,
    readOnlyRootFs: sc.readOnlyRootFilesystem === true,
    dropAllCapabilities: drop.includes("ALL"),
    noNewPrivileges: sc.allowPrivilegeEscalation === false,
    tmpfs,
    mounts,
    memoryBytes: memoryBytes(limits.memory),
    cpus: cpus(limits.cpu),
    restartAlways: (c.podSpec.restartPolicy ?? "Always") === "Always",
  };
}

/** A container port by name or number. */
export function containerPort(c: ChartContainer, port: string | number): number {
  if (typeof port === "number") return port;
  const p = (c.container.ports ?? []).find((x: any) => x.name === port);
  if (!p) throw new Error(`${c.workload}/${c.container.name}: no port named ${port}`);
  return p.containerPort;
}

export type Probe = { grpc: { port: number; service: string } } | { http: { port: number; path: string } };

/** The readiness (else startup, else liveness) probe the chart gives the container. */
export function readinessProbe(c: ChartContainer): Probe | undefined {
  const p = c.container.readinessProbe ?? c.container.startupProbe ?? c.container.livenessProbe;
  if (!p) return undefined;
  if (p.grpc) return { grpc: { port: containerPort(c, p.grpc.port), service: p.grpc.service ?? "" } };
  if (p.httpGet) return { http: { port: containerPort(c, p.httpGet.port), path: p.httpGet.path } };
  throw new Error(`${c.workload}/${c.container.name}: probe ${JSON.stringify(p)} is not supported here`);
}

/** The pod's termination grace period (the bound a kubelet gives SIGTERM before SIGKILL). */
export function graceSeconds(c: ChartContainer): number {
  return c.podSpec.terminationGracePeriodSeconds ?? 30;
}
