/**
 * The Helm chart, verified without a cluster: `helm lint --strict`, `helm template` for the
 * default, GKE, EKS, minimal and development value sets, every object validated (types,
 * required and unknown fields), and the safety properties of the deployment asserted.
 */
import { describe, expect, it } from "vitest";
import {
  dbPasswordViolations,
  entrypointViolations,
  harnessSwitchViolations,
  heapViolations,
  networkPolicyViolations,
  probeViolations,
  proxyAvailabilityViolations,
  railSecretName,
  railSecretViolations,
  securityViolations,
  telemetryViolations,
} from "./chart-checks.js";
import { chartDir, helm } from "./helm-tool.js";
import { validateObject } from "./k8s-validate.js";
import { byKind, component, containers, podSpecs, render, templateArgs, type K8sObject, type RenderOptions } from "./render.js";

const MINIMAL = ["rail.url=https://rail.example.com", "rail.existingSecret=rail-cred", "rail.egress.cidrs={203.0.113.0/24}"];
const DEV = [
  "railStub.enabled=true",
  "rail.credential=dev-only-credential",
  // One development password per credential: the chart creates one Secret each.
  ...["migrations", "railProxy", "executor", "payouts", "reconciler", "auditor"].map((k) => `database.paydb.credentials.${k}.password=dev-paydb-${k}`),
  "database.lockdb.credentials.migrations.password=dev-lockdb-owner",
  "database.lockdb.credentials.lock.password=dev-lockdb-lock",
  "database.raildb.password=dev-raildb",
  "lock.backend=etcd",
  "etcd.endpoints={http://etcd-0.etcd:2379}",
  "networkPolicy.etcd.cidrs={10.8.0.0/24}",
  "railProxy.hpa.enabled=true",
  "prometheusRule.enabled=true",
  "serviceMonitor.enabled=true",
  "googleManagedPrometheus.enabled=true",
  "dashboards.enabled=true",
];

const variants: Array<{ name: string; opts: RenderOptions; railCidrs: string[] }> = [
  { name: "default", opts: {}, railCidrs: ["192.0.2.0/24"] },
  { name: "gke", opts: { valuesFiles: ["values-gke.yaml"] }, railCidrs: ["198.51.100.0/24"] },
  { name: "eks", opts: { valuesFiles: ["values-eks.yaml"] }, railCidrs: ["198.51.100.0/24"] },
  { name: "minimal", opts: { set: MINIMAL }, railCidrs: ["203.0.113.0/24"] },
  { name: "dev (stub, etcd, hpa, monitoring)", opts: { set: DEV }, railCidrs: [] },
  { name: "minimal with PodMonitor", opts: { set: [...MINIMAL, "podMonitor.enabled=true", "prometheusRule.enabled=true"] }, railCidrs: ["203.0.113.0/24"] },
];

describe("helm lint --strict", () => {
  it.each([[[]], [["-f", `${chartDir}/values-gke.yaml`]], [["-f", `${chartDir}/values-eks.yaml`]]])("passes with %j", (extra) => {
    const r = helm(["lint", "--strict", chartDir, ...extra]);
    expect(r.stderr + r.stdout).toContain("0 chart(s) failed");
    expect(r.status).toBe(0);
  });
});

describe.each(variants)("helm template: $name", ({ opts, railCidrs }) => {
  const objects = render(opts);

  it("renders every component, each object valid with no unknown fields", async () => {
    const workloads = podSpecs(objects).map((p) => p.component);
    expect(workloads).toEqual(expect.arrayContaining(["lock", "rail-proxy", "payouts", "executor", "reconciler", "audit", "migrate"]));
    const problems = (await Promise.all(objects.map(validateObject))).flat();
    expect(problems).toEqual([]);
  });

  it("mounts the rail credential only into rail-proxy (and the dev stub), read-only", () => {
    expect(railSecretViolations(objects)).toEqual([]);
    const readers = podSpecs(objects)
      .filter((p) => (p.spec.volumes ?? []).some((v: any) => v.secret?.secretName === railSecretName(objects)))
      .map((p) => p.component);
    expect(readers).toContain("rail-proxy");
  });

  it("keeps at least two rail-proxy replicas with a PDB and zone and node spread", () => {
    expect(proxyAvailabilityViolations(objects)).toEqual([]);
  });

  it("names none of the harness's control variables in any pod", () => {
    expect(harnessSwitchViolations(objects)).toEqual([]);
  });

  it("gives each component its own database password, and mounts no Secret a container does not read", () => {
    expect(dbPasswordViolations(objects)).toEqual([]);
  });

  it("restricts the network: only rail-proxy egresses to the rail, default deny per component", () => {
    expect(networkPolicyViolations(objects, railCidrs)).toEqual([]);
  });

  it("probes every gRPC server: the metrics port under mutual TLS, gRPC probes in cleartext", () => {
    expect(probeViolations(objects)).toEqual([]);
  });

  it("runs no container as root, with a read-only root filesystem", () => {
    expect(securityViolations(objects)).toEqual([]);
  });

  it("starts only entrypoints that exist in services/", () => {
    expect(entrypointViolations(objects)).toEqual([]);
  });

  it("gives every Node container a heap limit that fits its memory limit", () => {
    expect(heapViolations(objects)).toEqual([]);
  });

  it("leaves the image's telemetry start-up alone and points every component at the collector", () => {
    expect(telemetryViolations(objects, true)).toEqual([]);
  });

  it("names each component in OpenTelemetry and never puts a password in an env value", () => {
    for (const p of podSpecs(objects)) {
      for (const c of p.spec.containers) {
        const env = c.env ?? [];
        if (p.component !== "migrate") expect(env.find((e: any) => e.name === "OTEL_SERVICE_NAME")?.value).toBe(p.component);
        for (const e of env) {
          expect(e.name).not.toMatch(/PASSWORD$|CREDENTIAL$|SECRET$/);
          if (typeof e.value === "string" && /^postgres(ql)?:\/\//.test(e.value)) expect(new URL(e.value).password).toBe("");
        }
      }
    }
  });

  it("migrates paydb and lockdb in a pre-install/pre-upgrade hook, and runs the reconciler once per CronJob run", () => {
    const job = byKind(objects, "Job").find((j) => component(j) === "migrate")!;
    expect(job.metadata.annotations?.["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
    const dbs = containers(job.spec.template.spec).map((c: any) => c.command.at(-1));
    expect(dbs).toEqual(expect.arrayContaining(["paydb", "lockdb"]));
    const cron = byKind(objects, "CronJob").find((j) => component(j) === "reconciler")!;
    const env = cron.spec.jobTemplate.spec.template.spec.containers[0].env;
    expect(env.find((e: any) => e.name === "RECONCILE_INTERVAL_MS")?.value).toBe("0");
  });
});

describe("the checks catch regressions (negative controls)", () => {
  const base = render({ set: MINIMAL });
  const mutate = (fn: (objs: K8sObject[]) => void): K8sObject[] => {
    const copy = structuredClone(base);
    fn(copy);
    return copy;
  };
  const pod = (objs: K8sObject[], name: string) => podSpecs(objs).find((p) => p.component === name)!.spec;

  it("a rail credential mounted into an executor is reported", () => {
    const broken = mutate((objs) => {
      const spec = pod(objs, "executor");
      spec.volumes.push({ name: "rail", secret: { secretName: railSecretName(objs) } });
    });
    expect(railSecretViolations(broken)).toEqual([expect.stringContaining("(executor) references the rail credential")]);
  });

  it("a single proxy replica, a missing PDB or a missing zone spread is reported", () => {
    const broken = mutate((objs) => {
      const d = byKind(objs, "Deployment").find((x) => component(x) === "rail-proxy")!;
      d.spec.replicas = 1;
      d.spec.template.spec.topologySpreadConstraints = [];
      objs.splice(
        objs.findIndex((o) => o.kind === "PodDisruptionBudget" && component(o) === "rail-proxy"),
        1,
      );
    });
    expect(proxyAvailabilityViolations(broken)).toHaveLength(4);
  });

  it("rail egress from another component, or an open egress rule, is reported", () => {
    const broken = mutate((objs) => {
      const np = byKind(objs, "NetworkPolicy").find((x) => component(x) === "payouts")!;
      np.spec.egress.push({ to: [{ ipBlock: { cidr: "203.0.113.0/24" } }] }, { ports: [{ port: 443 }] });
    });
    expect(networkPolicyViolations(broken, ["203.0.113.0/24"])).toEqual([
      "payouts: egress to the rail 203.0.113.0/24",
      "payouts: egress rule open to anywhere",
    ]);
  });

  it("a TCP probe, a root container or a missing entrypoint is reported", () => {
    const broken = mutate((objs) => {
      const c = pod(objs, "lock").containers[0];
      c.readinessProbe = { tcpSocket: { port: 7100 } };
      c.securityContext.runAsUser = 0;
      c.command = ["node", "dist/services/no-such-service/main.js"];
    });
    expect(probeViolations(broken).join()).toContain("lock/lock: readinessProbe uses exec/tcpSocket");
    expect(securityViolations(broken)).toEqual(["lock/lock: may run as root"]);
    expect(entrypointViolations(broken)).toEqual(["lock/lock: services/no-such-service/main.ts does not exist"]);
  });

  it("a Node container without a heap limit, or with one its memory limit cannot hold, is reported", () => {
    const broken = mutate((objs) => {
      const proxy = pod(objs, "rail-proxy").containers[0];
      proxy.command = proxy.command.filter((a: string) => !a.startsWith("--max-old-space-size="));
      pod(objs, "lock").containers[0].resources.limits.memory = "192Mi";
    });
    const found = heapViolations(broken);
    expect(found).toHaveLength(2);
    expect(found).toEqual(
      expect.arrayContaining(["lock/lock: heap 160 MiB + 96 MiB exceeds the memory limit 192Mi", "rail-proxy/rail-proxy: no --max-old-space-size"]),
    );
    expect(entrypointViolations(broken)).toEqual([]);
  });

  it("a memory limit the heap limit cannot be derived from fails the render", () => {
    for (const limit of ["1.5Gi", "400M", "128Mi"]) {
      const r = helm(templateArgs({ set: [...MINIMAL, `railProxy.resources.limits.memory=${limit}`] }));
      expect(r.status, limit).not.toBe(0);
      expect(r.stderr, limit).toMatch(/resources\.limits\.memory/);
    }
  });

  it("a container that sets NODE_OPTIONS, or a component without the OTLP endpoint, is reported", () => {
    const broken = mutate((objs) => {
      pod(objs, "rail-proxy").containers[0].env.push({ name: "NODE_OPTIONS", value: "--max-old-space-size=256" });
      const lock = pod(objs, "lock").containers[0];
      lock.env = lock.env.filter((e: any) => e.name !== "OTEL_EXPORTER_OTLP_ENDPOINT");
    });
    const found = telemetryViolations(broken, true);
    expect(found).toHaveLength(2);
    expect(found).toEqual(
      expect.arrayContaining([
        "lock/lock: no OTEL_EXPORTER_OTLP_ENDPOINT",
        "rail-proxy/rail-proxy: sets NODE_OPTIONS, replacing the image's --import of the instrumentation",
      ]),
    );
    expect(telemetryViolations(render({ set: [...MINIMAL, "otel.enabled=false"] }), false)).toEqual([]);
    expect(telemetryViolations(base, false).length).toBeGreaterThan(0);
  });

  it("the audit reaching the collector or payouts, or exporting telemetry, is reported", () => {
    const broken = mutate((objs) => {
      const np = byKind(objs, "NetworkPolicy").find((x) => component(x) === "audit")!;
      np.spec.egress.push({
        to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "observability" } } }],
        ports: [{ port: 4318, protocol: "TCP" }],
      });
      const lockNp = byKind(objs, "NetworkPolicy").find((x) => component(x) === "lock")!;
      lockNp.spec.ingress[0].from.push({ podSelector: { matchLabels: { "app.kubernetes.io/component": "audit" } } });
      const env = pod(objs, "audit").containers[0].env;
      env.find((e: any) => e.name === "OTEL_SDK_DISABLED").value = "false";
    });
    expect(networkPolicyViolations(broken, ["203.0.113.0/24"]).sort()).toEqual(["audit: egress to the OTLP collector", "lock: ingress from audit"]);
    expect(telemetryViolations(broken, true)).toEqual([
      "audit/audit: exports telemetry, but its NetworkPolicy has no egress to the collector (OTEL_SDK_DISABLED must be true)",
    ]);
  });

  it("a control variable on any pod is reported, whatever its value", () => {
    const broken = mutate((objs) => {
      pod(objs, "rail-proxy").containers[0].env.push({ name: "RAIL_PROXY_DISABLED_GUARDS", value: "" });
      pod(objs, "executor").containers[0].env.push({ name: "EXECUTOR_TRUST_NOT_FOUND", value: "false" });
    });
    expect(harnessSwitchViolations(broken).sort()).toEqual([
      "executor/executor: sets EXECUTOR_TRUST_NOT_FOUND",
      "rail-proxy/rail-proxy: sets RAIL_PROXY_DISABLED_GUARDS",
    ]);
  });

  it("another component's database password, mounted or read, is reported", () => {
    const dev = render({ set: [...MINIMAL, "database.paydb.credentials.railProxy.password=rp", "database.paydb.credentials.executor.password=ex"] });
    expect(dbPasswordViolations(dev)).toEqual([]);
    const spec = (objs: K8sObject[], name: string) => podSpecs(objs).find((p) => p.component === name)!.spec;
    const mounted = structuredClone(dev);
    spec(mounted, "executor").volumes.push(spec(mounted, "rail-proxy").volumes.find((v: any) => v.name === "paydb-rail-proxy-password"));
    spec(mounted, "executor").containers[0].volumeMounts.push({
      name: "paydb-rail-proxy-password",
      mountPath: "/var/run/secrets/railfence/paydb-rail-proxy",
      readOnly: true,
    });
    expect(dbPasswordViolations(mounted)).toEqual([
      "executor/executor: mounts Secret rf-railfence-paydb-rail-proxy-password that none of its *_FILE variables reads",
    ]);
    const read = structuredClone(mounted);
    spec(read, "executor").containers[0].env.find((e: any) => e.name === "PAYDB_PASSWORD_FILE").value = "/var/run/secrets/railfence/paydb-rail-proxy/password";
    expect(dbPasswordViolations(read)).toEqual([
      "executor/executor: mounts Secret rf-railfence-paydb-executor-password that none of its *_FILE variables reads",
      "executor and rail-proxy read the same database password rf-railfence-paydb-rail-proxy-password/password",
    ]);
  });

  it("an unknown field is reported by the validator", async () => {
    const broken = mutate((objs) => {
      pod(objs, "rail-proxy").containers[0].securityContext.readOnlyRootFileSystem = true;
    });
    const d = byKind(broken, "Deployment").find((x) => component(x) === "rail-proxy")!;
    expect(await validateObject(d)).toEqual([
      expect.stringContaining("unknown field .spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"),
    ]);
  });
});
