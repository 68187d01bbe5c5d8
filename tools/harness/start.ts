/**
 * `npm start`: the whole mesh on this machine, as real processes on 127.0.0.1.
 * PostgreSQL (data kept in .railfence/pgdata; under the temp dir when root runs a private
 * checkout), rail-stub, two rail-proxy replicas, the lock service, the payouts API, two
 * executors and the reconciler on a schedule. Writes the
 * endpoints to .railfence/endpoints.json (read by the `railfence` CLI). Ctrl-C stops it all.
 * Mutual TLS everywhere: a throwaway CA and one certificate per identity in .railfence/pki; the
 * endpoints file names the `operator` certificate the CLI presents.
 *
 *   npm start [-- --lock-backend pg|etcd] [-- --proxies N] [-- --executors N]
 */
import { createWriteStream, mkdirSync, writeFileSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { Mesh } from "./mesh.js";

const { values } = parseArgs({
  options: {
    "lock-backend": { type: "string", default: process.env.LOCK_BACKEND ?? "pg" },
    proxies: { type: "string", default: "2" },
    executors: { type: "string", default: "2" },
  },
});
const lockBackend = values["lock-backend"];
if (lockBackend !== "pg" && lockBackend !== "etcd") {
  console.error(`--lock-backend must be pg or etcd (got ${lockBackend})`);
  process.exit(2);
}

const stateDir = process.env.RAILFENCE_STATE_DIR ?? join(projectRoot(), ".railfence");
const logDir = join(stateDir, "logs");
mkdirSync(logDir, { recursive: true });
const logs = new Map<string, WriteStream>();

/** Full JSON logs go to .railfence/logs/<process>.log; warnings and errors also to the console. */
function onLine(name: string, line: string): void {
  let stream = logs.get(name);
  if (!stream) {
    stream = createWriteStream(join(logDir, `${name}.log`), { flags: "a" });
    logs.set(name, stream);
  }
  stream.write(`${line}\n`);
  if (/"level":"(warn|error|fatal)"/.test(line)) console.log(`[${name}] ${line}`);
}

// Traces: to the collector named by OTEL_EXPORTER_OTLP_ENDPOINT if set, else to a local file that
// `railfence trace <payout_id>` reads. Children inherit the environment.
if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT && !process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
  process.env.RAILFENCE_TRACE_FILE ??= join(stateDir, "traces.jsonl");
}

const mesh = new Mesh({ stateDir, tls: true, signTokens: true, durable: true, persistentPostgres: true, proxies: Number(values.proxies), onLine });
let stopping = false;

async function shutdown(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  console.log("\nstopping railfence ...");
  await mesh.stop();
  for (const s of logs.values()) s.end();
  console.log("stopped.");
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));

async function main(): Promise<void> {
  const started = Date.now();
  console.log("starting railfence (PostgreSQL, rail-stub, rail-proxy x%s, lock/%s, payouts, executors, reconciler) ...", values.proxies, lockBackend);
  await mesh.start();
  const lockEnv: Record<string, string> = {};
  if (lockBackend === "etcd") {
    const { EtcdServer } = await import("./etcd.js");
    const etcd = await EtcdServer.start();
    mesh.onStop(() => etcd.destroy());
    lockEnv.LOCK_BACKEND = "etcd";
    lockEnv.ETCD_ENDPOINTS = etcd.endpoint;
    // A fresh etcd starts its revisions low: the token floor keeps tokens above every token
    // paydb has ever seen (the documented backend-switch procedure).
    lockEnv.LOCK_TOKEN_FLOOR = String(await mesh.highestTokenSeen());
  }
  await mesh.startLock(lockEnv);
  await mesh.startPayouts();
  for (let i = 0; i < Number(values.executors); i++) await mesh.addExecutor();
  await mesh.startReconciler();

  const metrics: Record<string, string> = {};
  for (const p of mesh.processes()) if (p.ready?.metricsPort) metrics[p.name] = `http://127.0.0.1:${p.ready.metricsPort}/metrics`;
  const endpoints = {
    // The CLI's `reconcile` runs the reconciler with its role; `check` reads as the auditor.
    paydb: mesh.roleUrl("paydb", "reconciler"),
    paydbAudit: mesh.roleUrl("paydb", "auditor"),
    raildb: mesh.dbUrl("raildb"),
    lockdb: mesh.dbUrl("lockdb"),
    rail: mesh.railStub.url,
    railControl: mesh.railControlUrl,
    railProxy: mesh.proxies.map((p) => p.url),
    lock: mesh.lock!.url,
    lockBackend,
    payouts: mesh.payouts!.url,
    metrics,
    // The CLI calls as the operator (docs/security.md has what that identity may do).
    tls: { ca: mesh.identityFiles("operator").ca, cert: mesh.identityFiles("operator").cert, key: mesh.identityFiles("operator").key },
  };
  writeFileSync(join(stateDir, "endpoints.json"), `${JSON.stringify(endpoints, null, 2)}\n`);
  writeFileSync(join(stateDir, "env"), shellEnv(new URL(endpoints.payouts), mesh.identityFiles("client")));

  console.log(`\nrailfence is up (${((Date.now() - started) / 1000).toFixed(1)} s). Endpoints (also in .railfence/endpoints.json):`);
  console.log(`  payouts API    ${endpoints.payouts}   (gRPC, gRPC-Web, Connect over mutual TLS)`);
  console.log(`  rail-proxy     ${endpoints.railProxy.join("  ")}`);
  console.log(`  lock (${lockBackend.padEnd(4)})    ${endpoints.lock}`);
  console.log(`  rail-stub      ${endpoints.rail}   (control: ${endpoints.railControl})`);
  console.log(`  paydb          ${endpoints.paydb}`);
  for (const [name, url] of Object.entries(metrics)) console.log(`  metrics        ${name.padEnd(14)} ${url}`);
  console.log(`  certificates   ${mesh.pki!.dir}   (CLI: operator; curl/grpcurl: --cacert ca.crt --cert client.crt --key client.key)`);
  console.log(`  shell          . ${join(stateDir, "env")}   (RAILFENCE_PAYOUTS_URL, _ADDR, RAILFENCE_CA, _CERT, _KEY: the README's examples)`);
  console.log(`  logs           ${logDir}/<process>.log`);
  console.log(
    `  traces         ${process.env.RAILFENCE_TRACE_FILE ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT}`,
  );
  console.log("\nTry:  npx railfence payouts create --account acc-1 --amount 1050 --currency EUR --beneficiary ben-1");
  console.log("      npx railfence payouts get <payout_id>      npx railfence trace <payout_id>");
  console.log("Ctrl-C stops everything.");
}

/**
 * What a caller of the payouts API needs, as shell variables: its address and the `client`
 * identity's certificate (the API's caller; the CLI's operator identity may not create payouts
 * on another client's behalf). `. .railfence/env` in the README's examples.
 */
function shellEnv(payouts: URL, client: { ca: string; cert: string; key: string }): string {
  const q = (v: string) => `'${v.replaceAll("'", "'\\''")}'`;
  return [
    "# Written by npm start for the mesh it runs: `. .railfence/env`, then curl, grpcurl or buf curl (README).",
    `export RAILFENCE_PAYOUTS_URL=${q(payouts.origin)}`,
    `export RAILFENCE_PAYOUTS_ADDR=${q(payouts.host)}`,
    `export RAILFENCE_CA=${q(client.ca)}`,
    `export RAILFENCE_CERT=${q(client.cert)}`,
    `export RAILFENCE_KEY=${q(client.key)}`,
    "",
  ].join("\n");
}

main().catch(async (err: unknown) => {
  console.error("railfence failed to start:", err instanceof Error ? err.message : err);
  await shutdown(1);
});
