/**
 * A throwaway PKI for `npm start`, the drills and the tests: one CA and a certificate per
 * railfence identity, made with the openssl CLI. Every certificate carries the SAN URI
 * `spiffe://railfence/<identity>` (what services/shared/process/identity.ts reads) plus DNS localhost and
 * IP 127.0.0.1 (so it also works as a server certificate on this machine). Keys are 0600.
 *
 * Never use it for production: the CA key sits next to the certificates it signs.
 */
import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { TRUST_DOMAIN } from "../../services/shared/process/identity.js";

const run = promisify(execFile);

/** The openssl binary (OPENSSL env overrides; .ci installs /usr/bin/openssl). */
function openssl(): string {
  return process.env.OPENSSL ?? (existsSync("/usr/bin/openssl") ? "/usr/bin/openssl" : "openssl");
}

/** Paths of one identity's files, as the services' TLS_* variables want them. */
export interface IdentityFiles {
  cert: string;
  key: string;
  ca: string;
}

export interface IssueOptions {
  /** Validity in days (default 7). */
  days?: number;
  /** File stem (default: the identity); lets a test issue a second cert for the same identity. */
  fileName?: string;
  /** Extra SAN entries (openssl syntax, e.g. "DNS:rail-proxy.railfence.svc"). */
  extraSans?: string[];
}

export class Pki {
  private constructor(readonly dir: string) {}

  /** A new CA in dir (created 0700). caName distinguishes CAs in tests ("another CA"). */
  static async create(dir: string, caName = "railfence-dev-ca"): Promise<Pki> {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const pki = new Pki(dir);
    await run(openssl(), [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      pki.caKey,
      "-out",
      pki.caCert,
      "-days",
      "30",
      "-subj",
      `/CN=${caName}`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    chmodSync(pki.caKey, 0o600);
    return pki;
  }

  get caCert(): string {
    return join(this.dir, "ca.crt");
  }

  private get caKey(): string {
    return join(this.dir, "ca.key");
  }

  /** Issues (or re-issues) a certificate for identity, signed by this CA. */
  async issue(identity: string, opts: IssueOptions = {}): Promise<IdentityFiles> {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(identity)) throw new Error(`not an identity: ${identity}`);
    const stem = opts.fileName ?? identity;
    const key = join(this.dir, `${stem}.key`);
    const cert = join(this.dir, `${stem}.crt`);
    const csr = join(this.dir, `${stem}.csr`);
    const ext = join(this.dir, `${stem}.ext`);
    const sans = [`URI:spiffe://${TRUST_DOMAIN}/${identity}`, "DNS:localhost", "IP:127.0.0.1", ...(opts.extraSans ?? [])];
    writeFileSync(
      ext,
      `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${sans.join(",")}\n`,
    );
    await run(openssl(), ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr, "-subj", `/CN=${identity}`]);
    chmodSync(key, 0o600);
    await run(openssl(), [
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      this.caCert,
      "-CAkey",
      this.caKey,
      "-CAcreateserial",
      "-out",
      cert,
      "-days",
      String(opts.days ?? 7),
      "-extfile",
      ext,
    ]);
    return { cert, key, ca: this.caCert };
  }

  /** The TLS_* environment of a process running as identity (issue it first). */
  static env(files: IdentityFiles): Record<string, string> {
    return { TLS_CERT_FILE: files.cert, TLS_KEY_FILE: files.key, TLS_CA_FILE: files.ca };
  }

  /** nodeOptions for createGrpcTransport: a client presenting files' certificate. */
  static nodeOptions(files: IdentityFiles): { cert: Buffer; key: Buffer; ca: Buffer } {
    return { cert: readFileSync(files.cert), key: readFileSync(files.key), ca: readFileSync(files.ca) };
  }
}

/** Every identity the mesh runs as (services) or calls as (operator, client). */
export const MESH_IDENTITIES = ["rail", "rail-proxy", "lock", "payouts", "executor", "reconciler", "operator", "auditor", "client"] as const;
export type MeshIdentity = (typeof MESH_IDENTITIES)[number];
