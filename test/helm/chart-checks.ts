/**
 * The chart's safety properties as functions over rendered objects. Each returns the list of
 * violations (empty = property holds), so tests can also feed them a deliberately broken
 * rendering and prove they would catch the regression.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CONTROL_VARIABLES } from "../../tools/harness/controls/variables.js";
import { root } from "./helm-tool.js";
import { byKind, component, containers, podSpecs, type K8sObject } from "./render.js";

/** Pods that may see the rail credential: the proxy, and the dev stub that plays the rail. */
const RAIL_SECRET_READERS = new Set(["rail-proxy", "rail-stub"]);

/** Name of the Secret rail-proxy mounts as its credential. */
export function railSecretName(objects: K8sObject[]): string {
  const proxy = podSpecs(objects).find((p) => p.component === "rail-proxy");
  const env = containers(proxy?.spec).flatMap((c: any) => c.env ?? []);
  const file: string | undefined = env.find((e: any) => e.name === "RAIL_CREDENTIALS_FILE")?.value;
  const mount = containers(proxy?.spec)
    .flatMap((c: any) => c.volumeMounts ?? [])
    .find((m: any) => file?.startsWith(`${m.mountPath}/`));
  const volume = (proxy?.spec.volumes ?? []).find((v: any) => v.name === mount?.name);
  const name = volume?.secret?.secretName;
  if (!name) throw new Error("rail-proxy does not mount its RAIL_CREDENTIALS_FILE from a Secret");
  return name;
}

function secretRefs(spec: any): string[] {
  const names: string[] = [];
  for (const v of spec?.volumes ?? []) {
    if (v.secret?.secretName) names.push(v.secret.secretName);
    for (const s of v.projected?.sources ?? []) if (s.secret?.name) names.push(s.secret.name);
  }
  for (const c of containers(spec)) {
    for (const e of c.env ?? []) if (e.valueFrom?.secretKeyRef?.name) names.push(e.valueFrom.secretKeyRef.name);
    for (const e of c.envFrom ?? []) if (e.secretRef?.name) names.push(e.secretRef.name);
  }
  return names;
}

/** The rail credential reaches only rail-proxy (and the optional stub), read-only. */
export function railSecretViolations(objects: K8sObject[]): string[] {
  const secret = railSecretName(objects);
  const out: string[] = [];
  for (const p of podSpecs(objects)) {
    const refs = secretRefs(p.spec).includes(secret);
    const envFile = containers(p.spec).some((c: any) => (c.env ?? []).some((e: any) => e.name === "RAIL_CREDENTIALS_FILE"));
    if ((refs || envFile) && !RAIL_SECRET_READERS.has(p.component))
      out.push(`${p.owner.kind}/${p.owner.metadata.name} (${p.component}) references the rail credential`);
    if (refs) {
      const vol = (p.spec.volumes ?? []).find((v: any) => v.secret?.secretName === secret);
      for (const c of containers(p.spec))
        for (const m of c.volumeMounts ?? []) if (m.name === vol?.name && m.readOnly !== true) out.push(`${p.component}: rail credential mounted writable`);
    }
  }
  return out;
}

/** rail-proxy: >= 2 replicas, a PDB, zone and node spread, grace above the drain bound. */
export function proxyAvailabilityViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  const deploy = byKind(objects, "Deployment").find((d) => component(d) === "rail-proxy");
  if (!deploy) return ["no rail-proxy Deployment"];
  const hpa = byKind(objects, "HorizontalPodAutoscaler").find((h) => h.spec.scaleTargetRef.name === deploy.metadata.name);
  const replicas = hpa ? hpa.spec.minReplicas : deploy.spec.replicas;
  if (!(replicas >= 2)) out.push(`rail-proxy replicas ${replicas} < 2`);
  const selector = deploy.spec.selector.matchLabels as Record<string, string>;
  const matches = (labels: Record<string, string> | undefined) => !!labels && Object.entries(labels).every(([k, v]) => selector[k] === v);
  const pdb = byKind(objects, "PodDisruptionBudget").find((p) => matches(p.spec.selector?.matchLabels));
  if (!pdb) out.push("rail-proxy has no PodDisruptionBudget");
  else if (!(pdb.spec.minAvailable >= 1)) out.push("rail-proxy PDB minAvailable < 1");
  const spread = deploy.spec.template.spec.topologySpreadConstraints ?? [];
  for (const key of ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]) {
    const c = spread.find((s: any) => s.topologyKey === key);
    if (!c) out.push(`rail-proxy not spread across ${key}`);
    else if (!matches(c.labelSelector?.matchLabels)) out.push(`rail-proxy spread on ${key} does not select its own pods`);
  }
  const env = Object.fromEntries((deploy.spec.template.spec.containers[0].env ?? []).map((e: any) => [e.name, e.value]));
  const boundS = (Number(env.DRAIN_MS) + Number(env.RAIL_DEADLINE_MS)) / 1000;
  if (!(deploy.spec.template.spec.terminationGracePeriodSeconds > boundS))
    out.push(`grace ${deploy.spec.template.spec.terminationGracePeriodSeconds}s is not above the drain bound ${boundS}s`);
  return out;
}

/**
 * The harness's control variables (tools/harness/controls/variables.ts): the services read none of
 * them (decision 064), so a pod naming one is a mistake at best, and no pod may.
 */
export function harnessSwitchViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  const never = Object.values(CONTROL_VARIABLES).flat();
  for (const p of podSpecs(objects)) {
    for (const c of containers(p.spec)) {
      if ((c.envFrom ?? []).length) out.push(`${p.component}/${c.name}: envFrom`);
      for (const e of c.env ?? []) {
        if (never.includes(e.name)) out.push(`${p.component}/${c.name}: sets ${e.name}`);
      }
    }
  }
  return out;
}

/** The Secret and key a container's file env var (e.g. PAYDB_PASSWORD_FILE) reads, through its mount and volume. */
export function fileSource(spec: any, container: any, path: string): string | undefined {
  const mount = (container.volumeMounts ?? []).find((m: any) => path.startsWith(`${m.mountPath}/`));
  const volume = (spec.volumes ?? []).find((v: any) => v.name === mount?.name);
  if (!volume?.secret) return undefined;
  const file = path.slice(mount.mountPath.length + 1);
  const item = (volume.secret.items ?? []).find((i: any) => i.path === file);
  return `${volume.secret.secretName}/${item?.key ?? file}`;
}

/** Who a password reader is: the migration Job is the owner, except for raildb, the dev stub's own database (one credential). */
function migrationReader(component: string, container: any): string {
  if (component !== "migrate") return component;
  return container.command?.at(-1) === "raildb" ? "rail-stub" : "migrations";
}

/**
 * Database passwords: each component reads its own (no two components' *_PASSWORD_FILE resolve
 * to one Secret key; the migration Job, which creates the logins, may read theirs), and no
 * container mounts a Secret none of its *_FILE variables reads (e.g. another component's password).
 */
export function dbPasswordViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  const readers = new Map<string, Set<string>>();
  for (const p of podSpecs(objects)) {
    for (const c of containers(p.spec)) {
      const files = (c.env ?? []).filter((e: any) => /_FILE$/.test(e.name) && typeof e.value === "string");
      for (const e of files.filter((x: any) => /PASSWORD_FILE$/.test(x.name) && !x.name.startsWith("LOGIN_"))) {
        const src = fileSource(p.spec, c, e.value);
        if (!src) out.push(`${p.component}/${c.name}: ${e.name} is not read from a Secret`);
        else if (p.component !== "migrate" || e.name === "DATABASE_PASSWORD_FILE")
          readers.set(src, new Set([...(readers.get(src) ?? []), migrationReader(p.component, c)]));
      }
      for (const m of c.volumeMounts ?? []) {
        const volume = (p.spec.volumes ?? []).find((v: any) => v.name === m.name);
        if (!volume?.secret) continue;
        if (!files.some((e: any) => e.value.startsWith(`${m.mountPath}/`)))
          out.push(`${p.component}/${c.name}: mounts Secret ${volume.secret.secretName} that none of its *_FILE variables reads`);
      }
    }
  }
  for (const [src, who] of readers) if (who.size > 1) out.push(`${[...who].sort().join(" and ")} read the same database password ${src}`);
  return out;
}

/** Who may call rail-proxy: executors (SubmitPayout), the reconciler, and the read-only daily audit (GetRailStatement). */
const PROXY_CALLERS = ["executor", "reconciler", "audit"];

/** One-shot pods whose result is their Job status and log: no telemetry export, so no OTLP egress. */
export const NO_TELEMETRY_EXPORT = new Set(["audit"]);

function policyComponent(np: K8sObject): string | undefined {
  return np.spec.podSelector?.matchLabels?.["app.kubernetes.io/component"];
}

/**
 * NetworkPolicies: every workload component is selected by a policy with both directions;
 * no rule opens "anywhere" (an empty peer list); only rail-proxy reaches the rail; only
 * executor, reconciler and the audit reach rail-proxy; only executor reaches lock; a component
 * that exports no telemetry has no egress to the collector.
 */
export function networkPolicyViolations(objects: K8sObject[], railCidrs: string[], otlpPort = 4318): string[] {
  const out: string[] = [];
  const nps = byKind(objects, "NetworkPolicy");
  const perComponent = new Map(nps.filter(policyComponent).map((np) => [policyComponent(np)!, np]));
  for (const p of podSpecs(objects)) {
    const np = perComponent.get(p.component);
    if (!np) out.push(`${p.component}: no NetworkPolicy`);
    else if (!["Ingress", "Egress"].every((t) => np.spec.policyTypes?.includes(t))) out.push(`${p.component}: policy is not default-deny both ways`);
  }
  for (const np of nps) {
    const who = policyComponent(np) ?? np.metadata.name;
    for (const dir of ["ingress", "egress"] as const) {
      for (const rule of np.spec[dir] ?? []) {
        const peers = rule[dir === "ingress" ? "from" : "to"];
        if (!Array.isArray(peers) || peers.length === 0) out.push(`${who}: ${dir} rule open to anywhere`);
        for (const peer of peers ?? []) {
          if (peer.ipBlock?.cidr === "0.0.0.0/0" && dir === "egress" && who !== "rail-proxy") out.push(`${who}: egress to 0.0.0.0/0`);
          if (dir === "egress" && railCidrs.includes(peer.ipBlock?.cidr) && who !== "rail-proxy") out.push(`${who}: egress to the rail ${peer.ipBlock.cidr}`);
          const target = peer.podSelector?.matchLabels?.["app.kubernetes.io/component"];
          if (dir === "egress" && target === "rail-stub" && who !== "rail-proxy") out.push(`${who}: egress to the rail-stub`);
          if (dir === "egress" && target === "rail-proxy" && !PROXY_CALLERS.includes(who)) out.push(`${who}: egress to rail-proxy`);
          if (dir === "egress" && NO_TELEMETRY_EXPORT.has(who) && (rule.ports ?? []).some((p: any) => p.port === otlpPort))
            out.push(`${who}: egress to the OTLP collector`);
          if (dir === "egress" && target === "lock" && who !== "executor") out.push(`${who}: egress to lock`);
          if (dir === "ingress" && who === "rail-proxy" && target && !PROXY_CALLERS.includes(target)) out.push(`rail-proxy: ingress from ${target}`);
          if (dir === "ingress" && who === "lock" && target && target !== "executor") out.push(`lock: ingress from ${target}`);
        }
      }
    }
  }
  const proxy = perComponent.get("rail-proxy");
  const railRule = (proxy?.spec.egress ?? []).some((r: any) =>
    (r.to ?? []).some((p: any) => railCidrs.includes(p.ipBlock?.cidr) || p.podSelector?.matchLabels?.["app.kubernetes.io/component"] === "rail-stub"),
  );
  if (proxy && !railRule) out.push("rail-proxy has no egress rule to the rail");
  return out;
}

/** Probes: gRPC on every container that serves gRPC; otherwise only /healthz on the metrics port. */
export function probeViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  for (const p of podSpecs(objects)) {
    for (const c of p.spec.containers ?? []) {
      const grpcPort = (c.ports ?? []).find((x: any) => x.name === "grpc")?.containerPort;
      // Under mutual TLS the kubelet cannot probe the service port (it presents no certificate):
      // the probes move to the plain-HTTP metrics port, /readyz mirroring grpc.health.v1.
      const tls = (c.env ?? []).some((e: any) => e.name === "TLS_CERT_FILE");
      for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const probe = c[kind];
        if (!probe) continue;
        if (probe.exec || probe.tcpSocket) out.push(`${p.component}/${c.name}: ${kind} uses exec/tcpSocket`);
        if (grpcPort !== undefined && tls) {
          const path = kind === "readinessProbe" ? "/readyz" : "/healthz";
          if (probe.grpc) out.push(`${p.component}/${c.name}: ${kind} is a gRPC probe on a mutual-TLS port`);
          if (probe.httpGet?.path !== path || probe.httpGet?.port !== "metrics")
            out.push(`${p.component}/${c.name}: ${kind} is not ${path} on the metrics port`);
        }
        if (grpcPort !== undefined && !tls && probe.grpc?.port !== grpcPort) out.push(`${p.component}/${c.name}: ${kind} is not gRPC on port ${grpcPort}`);
        if (grpcPort === undefined && !(probe.httpGet?.path === "/healthz" && probe.httpGet?.port === "metrics"))
          out.push(`${p.component}/${c.name}: ${kind} is not /healthz`);
      }
      if (grpcPort !== undefined && (!c.readinessProbe || !c.livenessProbe)) out.push(`${p.component}/${c.name}: missing readiness/liveness probe`);
    }
  }
  return out;
}

/** Non-root, read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp, /tmp emptyDir. */
export function securityViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  for (const p of podSpecs(objects)) {
    const pod = p.spec.securityContext ?? {};
    if (pod.runAsNonRoot !== true || pod.runAsUser !== 10001) out.push(`${p.component}: pod may run as root`);
    if (pod.seccompProfile?.type !== "RuntimeDefault") out.push(`${p.component}: pod seccomp is not RuntimeDefault`);
    if (p.spec.hostNetwork || p.spec.hostPID || p.spec.hostIPC) out.push(`${p.component}: host namespaces`);
    const tmp = (p.spec.volumes ?? []).find((v: any) => v.emptyDir && v.name === "tmp");
    for (const c of containers(p.spec)) {
      const s = c.securityContext ?? {};
      const id = `${p.component}/${c.name}`;
      if (s.runAsNonRoot !== true || s.runAsUser === 0 || (s.runAsUser ?? pod.runAsUser) !== 10001) out.push(`${id}: may run as root`);
      if (s.readOnlyRootFilesystem !== true) out.push(`${id}: root filesystem writable`);
      if (s.allowPrivilegeEscalation !== false) out.push(`${id}: privilege escalation allowed`);
      if (s.privileged) out.push(`${id}: privileged`);
      if (!(s.capabilities?.drop ?? []).includes("ALL") || (s.capabilities?.add ?? []).length) out.push(`${id}: capabilities not dropped`);
      if (s.seccompProfile?.type !== "RuntimeDefault") out.push(`${id}: seccomp is not RuntimeDefault`);
      if (!tmp || !(c.volumeMounts ?? []).some((m: any) => m.name === tmp.name && m.mountPath === "/tmp")) out.push(`${id}: no emptyDir at /tmp`);
    }
  }
  return out;
}

/** Every container runs `node dist/services/<name>/main.js` for a service whose main.ts exists. */
export function entrypointViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  for (const p of podSpecs(objects)) {
    for (const c of containers(p.spec)) {
      const cmd: string[] = [...(c.command ?? []), ...(c.args ?? [])];
      // node, its own flags (the heap limit: heapViolations), then the entrypoint.
      const entry = cmd.slice(1).find((a) => !a.startsWith("--"));
      const m = cmd[0] === "node" ? /^dist\/services\/([a-z0-9-]+)\/main\.js$/.exec(entry ?? "") : null;
      if (!m) out.push(`${p.component}/${c.name}: command ${JSON.stringify(cmd)} is not node dist/services/<name>/main.js`);
      else if (!existsSync(join(root, "services", m[1]!, "main.ts"))) out.push(`${p.component}/${c.name}: services/${m[1]}/main.ts does not exist`);
      else if (m[1] === "harness") out.push(`${p.component}/${c.name}: the development harness is not in the image`);
    }
  }
  return out;
}

/**
 * Telemetry reaches every component: the image starts instrumentation through NODE_OPTIONS
 * (Dockerfile), so a container that sets NODE_OPTIONS itself silently turns tracing off; with
 * otel.enabled each long-running component exports to the endpoint under its own name, and with
 * it off the SDK is disabled explicitly; the one-shot audit never exports (NO_TELEMETRY_EXPORT).
 */
export function telemetryViolations(objects: K8sObject[], otelEnabled: boolean): string[] {
  const out: string[] = [];
  for (const p of podSpecs(objects)) {
    for (const c of containers(p.spec)) {
      const env = new Map<string, string | undefined>((c.env ?? []).map((e: any) => [e.name, e.value]));
      const where = `${p.component}/${c.name}`;
      if (env.has("NODE_OPTIONS")) out.push(`${where}: sets NODE_OPTIONS, replacing the image's --import of the instrumentation`);
      if ((c.envFrom ?? []).length > 0) out.push(`${where}: envFrom can override NODE_OPTIONS or OTEL_* unseen`);
      if (p.component === "migrate") continue;
      if (NO_TELEMETRY_EXPORT.has(p.component)) {
        if (env.get("OTEL_SDK_DISABLED") !== "true")
          out.push(`${where}: exports telemetry, but its NetworkPolicy has no egress to the collector (OTEL_SDK_DISABLED must be true)`);
      } else if (otelEnabled) {
        if (!env.get("OTEL_EXPORTER_OTLP_ENDPOINT")) out.push(`${where}: no OTEL_EXPORTER_OTLP_ENDPOINT`);
        if (env.get("OTEL_SDK_DISABLED") === "true") out.push(`${where}: OTEL_SDK_DISABLED=true with otel.enabled`);
      } else if (env.get("OTEL_SDK_DISABLED") !== "true") out.push(`${where}: otel.enabled=false but OTEL_SDK_DISABLED is not true`);
      if (env.get("OTEL_SERVICE_NAME") !== p.component) out.push(`${where}: OTEL_SERVICE_NAME is not ${p.component}`);
    }
  }
  return out;
}

/** A container memory limit in MiB ("384Mi", "1Gi"); NaN for anything else. */
function mebibytes(limit: unknown): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(String(limit ?? ""));
  return m ? Number(m[1]) * (m[2] === "Gi" ? 1024 : 1) : Number.NaN;
}

/**
 * Every Node container runs with a V8 old-space limit that fits its memory limit with 96 MiB to
 * spare (young generation, code, native memory): without one, V8 sizes its heap from the node's
 * memory and lets the old generation grow several times over between full collections
 * (docs/decisions/020-node-heap-limit.md).
 */
export function heapViolations(objects: K8sObject[]): string[] {
  const out: string[] = [];
  for (const p of podSpecs(objects)) {
    for (const c of containers(p.spec)) {
      const cmd: string[] = [...(c.command ?? []), ...(c.args ?? [])];
      if (cmd[0] !== "node") continue;
      const flag = cmd.find((a) => a.startsWith("--max-old-space-size="));
      const heap = flag ? Number(flag.split("=")[1]) : Number.NaN;
      const limit = mebibytes(c.resources?.limits?.memory);
      if (!flag) out.push(`${p.component}/${c.name}: no --max-old-space-size`);
      else if (!(heap + 96 <= limit)) out.push(`${p.component}/${c.name}: heap ${heap} MiB + 96 MiB exceeds the memory limit ${c.resources?.limits?.memory}`);
    }
  }
  return out;
}
