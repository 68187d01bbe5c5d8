/**
 * What can be tested of NetworkPolicy on a cluster whose CNI (Debian's bridge plugin) does not
 * enforce it: the API server accepted the objects, and every selector in them matches the pods
 * it is meant to match, resolved against the running pods (not against the rendered YAML):
 * each policy selects its component's pods, each peer selector resolves to the components the
 * chart's rules name, the DNS peer resolves to the cluster's CoreDNS pods, and the ipBlocks
 * contain the node address where PostgreSQL and the OTLP receiver listen.
 */
import type { ImageRef } from "./image.js";
import { sleep, type ClusterInfo, type Kube, type KubeList, type Pod } from "./kube.js";

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}
interface Peer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string };
}
interface Rule {
  from?: Peer[];
  to?: Peer[];
  ports?: Array<{ port: number }>;
}
interface NetworkPolicy {
  metadata: { name: string };
  spec: { podSelector: LabelSelector; policyTypes: string[]; ingress?: Rule[]; egress?: Rule[] };
}

const COMPONENT = "app.kubernetes.io/component";

/** Which components each policy's pod peers must resolve to (the chart's intended flows). */
const EXPECTED: Record<string, { ingressFrom: string[]; egressTo: string[] }> = {
  "rail-proxy": { ingressFrom: ["executor", "reconciler", "audit"], egressTo: ["rail-stub"] },
  lock: { ingressFrom: ["executor"], egressTo: [] },
  payouts: { ingressFrom: [], egressTo: [] },
  executor: { ingressFrom: [], egressTo: ["lock", "rail-proxy"] },
  reconciler: { ingressFrom: [], egressTo: ["rail-proxy"] },
  audit: { ingressFrom: [], egressTo: ["rail-proxy"] },
  "rail-stub": { ingressFrom: ["rail-proxy"], egressTo: [] },
  migrate: { ingressFrom: [], egressTo: [] },
};

function selectorArg(s: LabelSelector): string {
  const parts = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of s.matchExpressions ?? []) {
    if (e.operator === "In") parts.push(`${e.key} in (${(e.values ?? []).join(",")})`);
    else if (e.operator === "NotIn") parts.push(`${e.key} notin (${(e.values ?? []).join(",")})`);
    else if (e.operator === "Exists") parts.push(e.key);
    else if (e.operator === "DoesNotExist") parts.push(`!${e.key}`);
  }
  return parts.join(",");
}

function ipInCidr(ip: string, cidr: string): boolean {
  const [net, bits] = cidr.split("/");
  const n = (a: string) => a.split(".").reduce((acc, o) => (acc << 8) + Number(o), 0) >>> 0;
  const mask = Number(bits) === 0 ? 0 : (~0 << (32 - Number(bits))) >>> 0;
  return (n(ip) & mask) === (n(net!) & mask);
}

export function checkNetworkPolicies(k: Kube, ns: string, release: string, info: ClusterInfo): string {
  const policies = k.json<KubeList<NetworkPolicy>>(["-n", ns, "get", "networkpolicies"]).items;
  const podsBy = (s: LabelSelector, inNs = ns) => k.json<KubeList<Pod>>(["-n", inNs, "get", "pods", "-l", selectorArg(s)]).items;
  const releasePods = podsBy({ matchLabels: { "app.kubernetes.io/instance": release } });
  const problems: string[] = [];
  const seen = new Set<string>();
  let peersResolved = 0;

  for (const p of policies) {
    const name = p.metadata.name.replace(`${release}-`, "");
    const selected = podsBy(p.spec.podSelector);
    if (name === "default-deny") {
      const missed = releasePods.filter((rp) => !selected.some((s) => s.metadata.name === rp.metadata.name));
      if (missed.length) problems.push(`default-deny misses ${missed.map((m) => m.metadata.name).join(", ")}`);
      if (p.spec.policyTypes.sort().join() !== "Egress,Ingress") problems.push("default-deny does not cover both directions");
      seen.add(name);
      continue;
    }
    const expected = EXPECTED[name];
    if (!expected) continue;
    seen.add(name);
    // The policy selects exactly its component's pods (none exist for Jobs that are not running).
    const wrong = selected.filter((s) => s.metadata.labels?.[COMPONENT] !== name);
    if (wrong.length) problems.push(`${name} policy selects ${wrong.map((w) => w.metadata.name).join(", ")}`);
    const running = releasePods.filter((rp) => rp.metadata.labels?.[COMPONENT] === name);
    if (running.length && selected.length !== running.length) problems.push(`${name} policy selects ${selected.length} of its ${running.length} pods`);

    for (const [dir, rules, want] of [
      ["ingress", p.spec.ingress ?? [], expected.ingressFrom],
      ["egress", p.spec.egress ?? [], expected.egressTo],
    ] as const) {
      const comps = new Set<string>();
      for (const rule of rules) {
        for (const peer of (dir === "ingress" ? rule.from : rule.to) ?? []) {
          if (peer.podSelector && !peer.namespaceSelector) {
            const comp = peer.podSelector.matchLabels?.[COMPONENT];
            if (!comp) problems.push(`${name} ${dir}: a pod peer without a component`);
            else comps.add(comp);
            // The selector must match the running pods of that component (all of them, nothing else).
            // Both lists read now: a CronJob's pod (reconciler, the daily audit) may have started
            // since the release's pods were listed above.
            const matched = podsBy(peer.podSelector);
            const ofComp = podsBy({ matchLabels: { "app.kubernetes.io/instance": release, [COMPONENT]: comp! } });
            if (matched.some((m) => m.metadata.labels?.[COMPONENT] !== comp) || matched.length !== ofComp.length) {
              problems.push(`${name} ${dir} peer ${selectorArg(peer.podSelector)} matches ${matched.length} pods, ${comp} has ${ofComp.length}`);
            }
            peersResolved++;
          } else if (peer.namespaceSelector) {
            // DNS (kube-system, k8s-app=kube-dns) must resolve to this cluster's CoreDNS pods.
            const namespaces = k.json<KubeList>(["get", "ns", "-l", selectorArg(peer.namespaceSelector)]).items.map((n) => n.metadata.name);
            if (peer.podSelector?.matchLabels?.["k8s-app"] === "kube-dns") {
              const dns = namespaces.flatMap((n) => podsBy(peer.podSelector!, n));
              if (dns.length === 0) problems.push(`${name}: the DNS peer matches no pod`);
              peersResolved++;
            }
          } else if (peer.ipBlock) {
            // PostgreSQL / OTLP receiver / payouts clients: on the node's bridge address.
            if (!ipInCidr(info.nodeIp, peer.ipBlock.cidr))
              problems.push(`${name} ${dir}: ipBlock ${peer.ipBlock.cidr} does not contain the node address ${info.nodeIp}`);
            peersResolved++;
          }
        }
      }
      const missing = want.filter((w) => !comps.has(w));
      const extra = [...comps].filter((c) => !want.includes(c));
      if (missing.length || extra.length) problems.push(`${name} ${dir}: missing ${missing.join(",") || "-"}, unexpected ${extra.join(",") || "-"}`);
    }
  }
  const absent = ["default-deny", ...Object.keys(EXPECTED)].filter((n) => !seen.has(n));
  if (absent.length) problems.push(`no policy for ${absent.join(", ")}`);
  if (problems.length) throw new Error(problems.join("; "));
  return `${policies.length} policies; each selects its component's ${releasePods.length > 0 ? "running " : ""}pods; ${peersResolved} peers resolved (pod peers to the intended components, DNS to CoreDNS, ipBlocks contain ${info.nodeIp})`;
}

type Verdict = "CONNECTED" | "BLOCKED";

/**
 * One TCP probe pod: the labels it carries are what NetworkPolicy judges it by. Tries each
 * target (3 s each) and returns CONNECTED or BLOCKED per target (a timeout or a refusal).
 */
async function tcpProbe(k: Kube, ns: string, image: ImageRef, name: string, labels: Record<string, string>, targets: string[]): Promise<Verdict[]> {
  // The policy controller programs a new pod's address some seconds after the pod starts (the
  // first run's probes were blocked from peers the policies admit): wait, then try each target
  // three times.
  const script = `const net=require("net");const t=JSON.parse(process.env.TARGETS);const once=(host,port)=>new Promise((r)=>{const s=net.connect({host,port:+port,timeout:3000});s.on("connect",()=>{s.destroy();r("CONNECTED")});s.on("timeout",()=>{s.destroy();r("BLOCKED")});s.on("error",()=>r("BLOCKED"))});setTimeout(async()=>{const out=[];for(const x of t){const [host,port]=x.split(":");let v="BLOCKED";for(let i=0;i<3&&v==="BLOCKED";i++)v=await once(host,port);out.push(v)}console.log(JSON.stringify(out));process.exit(0)},8000);`;
  k.must(
    ["apply", "-f", "-"],
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      // No pod-template-hash: no ReplicaSet adopts it, whatever component label it carries.
      metadata: { name, namespace: ns, labels: { ...labels, "railfence.dev/probe": "networkpolicy" } },
      spec: {
        restartPolicy: "Never",
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: "RuntimeDefault" } },
        containers: [
          {
            name: "probe",
            image: `${image.repository}:${image.tag}`,
            imagePullPolicy: "Never",
            command: ["node", "-e", script],
            env: [{ name: "TARGETS", value: JSON.stringify(targets) }],
            securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
          },
        ],
      },
    }),
  );
  try {
    for (let i = 0; i < 90; i++) {
      const phase = k.kubectl(["-n", ns, "get", "pod", name, "-o", "jsonpath={.status.phase}"]).stdout;
      if (phase === "Succeeded" || phase === "Failed") break;
      await sleep(1000);
    }
    const out = k.kubectl(["-n", ns, "logs", name]).stdout.trim();
    const parsed = JSON.parse(out.split("\n").pop() || "null") as Verdict[] | null;
    if (!parsed || parsed.length !== targets.length) throw new Error(`probe ${name} printed ${out.slice(0, 200)}`);
    return parsed;
  } finally {
    k.kubectl(["-n", ns, "delete", "pod", name, "--wait=false"]);
  }
}

export interface EnforcementResult {
  summary: string;
  rows: Array<{ from: string; to: string; want: Verdict; got: Verdict; phase: string }>;
}

/**
 * NetworkPolicy enforced (kube-router's policy controller on the node): a pod with the
 * executor's labels cannot open a connection to the rail (rail-stub's port), a pod with
 * rail-proxy's labels can; an unlabelled pod cannot reach rail-proxy, the executor's labels can.
 * Negative control: with the release's policies deleted the executor-labelled pod reaches the
 * rail, and the check would have failed; the policies are then restored and the block is back.
 */
export async function checkEnforcement(k: Kube, ns: string, release: string, image: ImageRef): Promise<EnforcementResult> {
  const ipOf = (c: string) => {
    const p = k.json<KubeList<Pod>>([
      "-n",
      ns,
      "get",
      "pods",
      "-l",
      `app.kubernetes.io/instance=${release},${COMPONENT}=${c}`,
      "--field-selector=status.phase=Running",
    ]).items[0];
    if (!p?.status.podIP) throw new Error(`no running ${c} pod`);
    return p.status.podIP;
  };
  const rail = `${ipOf("rail-stub")}:7300`;
  const proxy = `${ipOf("rail-proxy")}:7200`;
  const as = (c: string) => ({ "app.kubernetes.io/name": "railfence", "app.kubernetes.io/instance": release, [COMPONENT]: c });
  const id = Date.now().toString(36);
  const rows: EnforcementResult["rows"] = [];
  const record = (phase: string, from: string, to: string, want: Verdict, got: Verdict) => rows.push({ phase, from, to, want, got });

  const [exRail, exProxy] = await tcpProbe(k, ns, image, `np-executor-${id}`, as("executor"), [rail, proxy]);
  record("policies in place", "executor's labels", `rail ${rail}`, "BLOCKED", exRail!);
  record("policies in place", "executor's labels", `rail-proxy ${proxy}`, "CONNECTED", exProxy!);
  const [rpRail] = await tcpProbe(k, ns, image, `np-rail-proxy-${id}`, as("rail-proxy"), [rail]);
  record("policies in place", "rail-proxy's labels", `rail ${rail}`, "CONNECTED", rpRail!);
  const [noneProxy] = await tcpProbe(k, ns, image, `np-none-${id}`, {}, [proxy]);
  record("policies in place", "no release labels", `rail-proxy ${proxy}`, "BLOCKED", noneProxy!);

  // Negative control: the same probe with the release's policies gone.
  const saved = k.json<KubeList<{ metadata: Record<string, unknown>; spec: unknown }>>([
    "-n",
    ns,
    "get",
    "networkpolicy",
    "-l",
    `app.kubernetes.io/instance=${release}`,
  ]);
  k.must(["-n", ns, "delete", "networkpolicy", "-l", `app.kubernetes.io/instance=${release}`]);
  try {
    await sleep(3000);
    const [open] = await tcpProbe(k, ns, image, `np-control-${id}`, as("executor"), [rail]);
    record("policies deleted (control)", "executor's labels", `rail ${rail}`, "CONNECTED", open!);
  } finally {
    for (const p of saved.items) {
      const { name, namespace, labels, annotations } = p.metadata as Record<string, unknown>;
      k.must(
        ["apply", "-f", "-"],
        JSON.stringify({ apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name, namespace, labels, annotations }, spec: p.spec }),
      );
    }
  }
  await sleep(3000);
  const [again] = await tcpProbe(k, ns, image, `np-restored-${id}`, as("executor"), [rail]);
  record("policies restored", "executor's labels", `rail ${rail}`, "BLOCKED", again!);

  const wrong = rows.filter((r) => r.want !== r.got);
  if (wrong.length) throw new Error(wrong.map((r) => `${r.phase}: ${r.from} -> ${r.to}: ${r.got}, expected ${r.want}`).join("; "));
  return {
    summary: `the executor's labels cannot reach the rail, rail-proxy's can; no labels cannot reach rail-proxy, the executor's can; with the policies deleted the executor reaches the rail (control), restored: blocked again (${saved.items.length} policies)`,
    rows,
  };
}
