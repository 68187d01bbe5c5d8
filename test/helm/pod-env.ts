/**
 * Runs a rendered container's configuration outside Kubernetes: its Secret volume mounts are
 * written as files under a temp dir (only the items the volume selects, as the kubelet does) and
 * every env value naming a file under a mount is pointed there. Lets tests feed the chart's env
 * to the services' own config validation and to real processes.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Secret contents by Secret name, then key: what the cluster would hold. */
export type Secrets = Record<string, Record<string, string>>;

/**
 * The container's env as a process would see it. Secret mounts are materialized under baseDir;
 * a mounted Secret or key missing from `secrets` throws (the pod would not start).
 */
export function containerEnv(podSpec: any, container: any, secrets: Secrets, baseDir: string): Record<string, string> {
  const volumes = new Map<string, any>((podSpec.volumes ?? []).map((v: any) => [v.name, v]));
  const mounts: string[] = [];
  for (const m of container.volumeMounts ?? []) {
    const secret = volumes.get(m.name)?.secret;
    if (!secret) continue;
    const data = secrets[secret.secretName];
    if (!data) throw new Error(`Secret ${secret.secretName} (volume ${m.name}) does not exist`);
    const dir = join(baseDir, m.mountPath);
    mkdirSync(dir, { recursive: true });
    const items: Array<{ key: string; path: string }> = secret.items ?? Object.keys(data).map((k) => ({ key: k, path: k }));
    for (const item of items) {
      if (data[item.key] === undefined) throw new Error(`Secret ${secret.secretName} has no key ${item.key}`);
      writeFileSync(join(dir, item.path), data[item.key]!, { mode: 0o600 });
    }
    mounts.push(m.mountPath);
  }
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    if (!("value" in e)) continue; // fieldRef and friends: set by Kubernetes, not by the chart
    const value = String(e.value);
    env[e.name] = mounts.some((p) => value.startsWith(`${p}/`)) ? join(baseDir, value) : value;
  }
  return env;
}

/** The Secrets a rendering creates itself (decoded): the chart's certificates, its signing key, development passwords. */
export function renderedSecrets(objects: Array<{ kind: string; metadata: { name: string }; data?: Record<string, string> }>): Secrets {
  return Object.fromEntries(
    objects
      .filter((o) => o.kind === "Secret")
      .map((o) => [o.metadata.name, Object.fromEntries(Object.entries(o.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString()]))]),
  );
}
