/**
 * The test's own API client certificates, issued by the release's CA the way an operator issues
 * one for a payouts client (docs/deploy.md "API clients"): read the chart's CA Secret, sign a
 * certificate whose SAN URI is spiffe://railfence/<identity>. Used by the node's gRPC clients
 * (load, first payout) and, as a Secret, by the drill's load Job.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Kube } from "./kube.js";

export interface ClientTlsFiles {
  cert: string;
  key: string;
  ca: string;
  /** The name the server certificate is checked against (clients dial a ClusterIP). */
  servername: string;
}

/** Issues `identity`'s certificate from the release's CA into dir. */
export function issueClientCertificate(k: Kube, ns: string, caSecret: string, identity: string, servername: string, dir: string): ClientTlsFiles {
  const field = (key: string) =>
    Buffer.from(k.must(["-n", ns, "get", "secret", caSecret, "-o", `jsonpath={.data.${key.replace(".", "\\.")}}`]).trim(), "base64").toString();
  const f = (name: string) => join(dir, `${identity}-${name}`);
  writeFileSync(f("ca.crt"), field("tls.crt"));
  writeFileSync(f("ca.key"), field("tls.key"), { mode: 0o600 });
  writeFileSync(f("ext"), `basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\nsubjectAltName=URI:spiffe://railfence/${identity}\n`);
  const openssl = (args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "pipe", "pipe"] });
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f("tls.key"), "-out", f("csr"), "-subj", `/CN=${identity}`]);
  openssl([
    "x509",
    "-req",
    "-in",
    f("csr"),
    "-CA",
    f("ca.crt"),
    "-CAkey",
    f("ca.key"),
    "-CAcreateserial",
    "-days",
    "2",
    "-out",
    f("tls.crt"),
    "-extfile",
    f("ext"),
  ]);
  return { cert: f("tls.crt"), key: f("tls.key"), ca: f("ca.crt"), servername };
}

/** The same files as a kubernetes.io/tls Secret with ca.crt, for pods. */
export function clientSecret(k: Kube, ns: string, name: string, files: ClientTlsFiles): void {
  k.must([
    "-n",
    ns,
    "create",
    "secret",
    "generic",
    name,
    `--from-file=tls.crt=${files.cert}`,
    `--from-file=tls.key=${files.key}`,
    `--from-file=ca.crt=${files.ca}`,
  ]);
}

/** http2 / connect-node options for these files. */
export function clientNodeOptions(files: ClientTlsFiles): { cert: Buffer; key: Buffer; ca: Buffer; servername: string } {
  return { cert: readFileSync(files.cert), key: readFileSync(files.key), ca: readFileSync(files.ca), servername: files.servername };
}
