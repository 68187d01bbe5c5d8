/**
 * Authorization in the cluster, under the chart's default mutual TLS: pods in the release's
 * namespace call rail-proxy's SubmitPayout with the certificate Secret of another component
 * (payouts: a compromised pod of the wrong component), with the executor's (the one identity
 * allowed: the positive control, whose forged huge token must then be refused by the signature
 * check), and with no certificate at all (no TLS session). The probe pods carry the executor's
 * labels, so any NetworkPolicy admits them: what refuses them is the identity, not the network.
 */
import type { ImageRef } from "./image.js";
import { sleep, type Kube } from "./kube.js";

export interface AuthzAttempt {
  as: string;
  secret: string | undefined;
  outcome: string;
}

/** Connect JSON over HTTP/2 with TLS; prints one JSON line: {session, status, code, reasons} or {session:false, error}. */
const PROBE_JS = `
const http2 = require("node:http2"); const fs = require("node:fs");
const tls = { ca: fs.readFileSync("/ca/ca.crt"), servername: process.env.SERVERNAME };
if (fs.existsSync("/id/tls.crt")) { tls.cert = fs.readFileSync("/id/tls.crt"); tls.key = fs.readFileSync("/id/tls.key"); }
// The policy controller admits a new pod some seconds after it starts: wait, and retry a
// connection that fails below TLS (a TLS alert is an answer, and final).
let attempt = 0;
function run() {
attempt++;
const s = http2.connect(process.env.URL, tls);
let over = false;
const done = (o) => { if (over) return; over = true; if (!o.session && attempt < 4 && !/SSL|TLS|CERT/.test(o.error)) { s.destroy(); setTimeout(run, 2000); return; } console.log(JSON.stringify(o)); s.destroy(); process.exit(0); };
s.on("error", (e) => done({ session: false, error: e.code || e.message }));
const req = s.request({ ":method": "POST", ":path": "/railfence.railproxy.v1.RailProxyService/SubmitPayout", "content-type": "application/json" });
let data = ""; let status = 0;
req.setTimeout(10000, () => done({ session: false, error: "TIMEOUT" }));
req.on("response", (h) => { status = h[":status"]; });
req.on("data", (c) => { data += c; });
req.on("error", (e) => done({ session: false, error: e.code || e.message }));
req.on("end", () => {
  let body = {}; try { body = JSON.parse(data); } catch {}
  const reasons = (body.details || []).map((d) => Buffer.from(d.value || "", "base64").toString("latin1").match(/[A-Z][A-Z_]{5,}/g) || []).flat();
  done({ session: true, status, code: body.code || "ok", reasons });
});
req.end(JSON.stringify({ accountId: "authz-probe", payoutId: "authz-probe-1", fencingToken: "9223372036854775000",
  amount: { amountMinor: "100", currency: "EUR" }, beneficiary: "authz-probe", fencingTokenSignature: Buffer.alloc(32, 7).toString("base64") }));
}
setTimeout(run, 8000);
`;

async function probePod(
  k: Kube,
  ns: string,
  release: string,
  image: ImageRef,
  name: string,
  identitySecret: string | undefined,
): Promise<Record<string, unknown>> {
  const volumes: unknown[] = [{ name: "ca", secret: { secretName: `${release}-executor-tls`, items: [{ key: "ca.crt", path: "ca.crt" }] } }];
  const mounts: unknown[] = [{ name: "ca", mountPath: "/ca", readOnly: true }];
  if (identitySecret) {
    volumes.push({ name: "id", secret: { secretName: identitySecret } });
    mounts.push({ name: "id", mountPath: "/id", readOnly: true });
  }
  k.must(
    ["apply", "-f", "-"],
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name,
        namespace: ns,
        // The executor's labels: the NetworkPolicies admit this pod to rail-proxy.
        labels: {
          "app.kubernetes.io/instance": release,
          "app.kubernetes.io/name": "railfence",
          "app.kubernetes.io/component": "executor",
          "railfence.dev/probe": "authz",
        },
      },
      spec: {
        restartPolicy: "Never",
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: "RuntimeDefault" } },
        containers: [
          {
            name: "probe",
            image: `${image.repository}:${image.tag}`,
            imagePullPolicy: "Never",
            command: ["node", "-e", PROBE_JS],
            env: [
              { name: "URL", value: `https://${release}-rail-proxy:7200` },
              { name: "SERVERNAME", value: `${release}-rail-proxy` },
            ],
            volumeMounts: mounts,
            securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
          },
        ],
        volumes,
      },
    }),
  );
  try {
    for (let i = 0; i < 90; i++) {
      const phase = k.kubectl(["-n", ns, "get", "pod", name, "-o", "jsonpath={.status.phase}"]).stdout;
      if (phase === "Succeeded" || phase === "Failed") break;
      await sleep(1000);
    }
    const out = k.kubectl(["-n", ns, "logs", name]).stdout.trim().split("\n").pop() ?? "";
    try {
      return JSON.parse(out) as Record<string, unknown>;
    } catch {
      throw new Error(`probe pod ${name} printed no result: ${out.slice(0, 300)}`);
    }
  } finally {
    k.kubectl(["-n", ns, "delete", "pod", name, "--wait=false"]);
  }
}

/** Runs the three attempts; throws unless each ends as the policy says. */
export async function checkAuthorization(k: Kube, ns: string, release: string, image: ImageRef): Promise<{ summary: string; attempts: AuthzAttempt[] }> {
  const id = Date.now().toString(36);
  const other = await probePod(k, ns, release, image, `authz-payouts-${id}`, `${release}-payouts-tls`);
  const executor = await probePod(k, ns, release, image, `authz-executor-${id}`, `${release}-executor-tls`);
  const none = await probePod(k, ns, release, image, `authz-none-${id}`, undefined);
  const describe = (r: Record<string, unknown>) =>
    r.session
      ? `HTTP ${r.status}, ${r.code}${(r.reasons as string[])?.length ? ` (${(r.reasons as string[]).join(", ")})` : ""}`
      : `no TLS session (${r.error})`;
  const attempts: AuthzAttempt[] = [
    { as: "payouts (another component's certificate)", secret: `${release}-payouts-tls`, outcome: describe(other) },
    { as: "executor (allowed; a forged huge token)", secret: `${release}-executor-tls`, outcome: describe(executor) },
    { as: "no certificate", secret: undefined, outcome: describe(none) },
  ];
  const problems: string[] = [];
  const reasons = (r: Record<string, unknown>) => (r.reasons as string[] | undefined) ?? [];
  if (!(other.session && other.code === "permission_denied" && reasons(other).includes("PERMISSION_DENIED")))
    problems.push(`payouts' identity was not refused SubmitPayout: ${describe(other)}`);
  // Positive control: the same call reaches the handler with the executor's identity (the
  // identity check passed), where the forged token's signature is refused.
  if (!executor.session || reasons(executor).includes("PERMISSION_DENIED")) problems.push(`the executor's identity was refused: ${describe(executor)}`);
  if (!reasons(executor).includes("TOKEN_SIGNATURE_INVALID")) problems.push(`a forged token was not refused by its signature: ${describe(executor)}`);
  if (none.session) problems.push(`a pod without a certificate got a TLS session: ${describe(none)}`);
  if (problems.length) throw new Error(problems.join("; "));
  return {
    summary: `SubmitPayout as payouts: ${describe(other)}; as executor with a forged token: ${describe(executor)}; without a certificate: ${describe(none)}`,
    attempts,
  };
}
