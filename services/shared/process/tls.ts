/**
 * TLS for every railfence server and client, from files only (a Kubernetes Secret volume):
 * TLS_CERT_FILE / TLS_KEY_FILE (this process's certificate, presented as server and as client)
 * and TLS_CA_FILE (the CA that signs every railfence identity; configuring it turns on mutual
 * TLS, so callers are identified and authorized by method).
 *
 * Certificates rotate without a restart: the server polls the files' metadata (fs.watchFile,
 * which survives the atomic symlink swap Kubernetes does on a Secret update, unlike fs.watch)
 * and swaps its secure context; connections opened after the swap get the new certificate.
 */
import { readFileSync, unwatchFile, watchFile } from "node:fs";
import { isIP } from "node:net";
import type { SecureContextOptions } from "node:tls";
import { createSecureContext } from "node:tls";
import { z } from "zod";
import { ConfigError, env } from "./config.js";

/**
 * How a mutual-TLS server treats a caller without a valid client certificate:
 * - `require`: the TLS handshake fails (the default: nothing unauthenticated reaches the app);
 * - `request`: the handshake succeeds without one, and the authorization interceptor refuses
 *   every method except grpc.health.v1 (for probes that cannot present a certificate).
 */
export type ClientAuth = "require" | "request";

/** TLS settings of one process; undefined fields mean "not configured". */
export interface TlsSettings {
  certFile: string;
  keyFile: string;
  /** CA for peers; set = mutual TLS (servers verify callers, clients verify servers against it). */
  caFile: string | undefined;
  clientAuth: ClientAuth;
  /** How often the server checks its files for a rotation. */
  reloadIntervalMs: number;
}

/** Env fields every service config spreads into its zod schema. */
export const tlsEnvShape = {
  /** This process's certificate (PEM file), presented as server and as client; set together with TLS_KEY_FILE (docs/security.md). */
  TLS_CERT_FILE: env.optionalFile(),
  /** The private key of TLS_CERT_FILE (PEM file). */
  TLS_KEY_FILE: env.optionalFile(),
  /** The CA that signs every railfence identity (PEM file); set = mutual TLS: callers are identified and authorized by method. */
  TLS_CA_FILE: env.optionalFile(),
  /**
   * A mutual-TLS server and a caller without a valid client certificate: `require` fails the
   * handshake; `request` lets it through to grpc.health.v1 only (probes that cannot present one).
   */
  TLS_CLIENT_AUTH: z.enum(["require", "request"]).default("require"),
  /** How often the certificate files are checked for a rotation (a rotation needs no restart). */
  TLS_RELOAD_INTERVAL_MS: env.ms(5000, 50, 3_600_000),
  /** Unidentified callers (plain h2c, or TLS without TLS_CA_FILE) on a non-loopback HOST are refused unless this is set explicitly. */
  ALLOW_INSECURE: env.bool(false),
};

/** What tlsEnvShape parses to. */
export interface TlsEnv {
  TLS_CERT_FILE?: string | undefined;
  TLS_KEY_FILE?: string | undefined;
  TLS_CA_FILE?: string | undefined;
  TLS_CLIENT_AUTH: ClientAuth;
  TLS_RELOAD_INTERVAL_MS: number;
  ALLOW_INSECURE: boolean;
}

/** TLS part of a service config: the settings (or undefined = plain h2c) and the insecure opt-in. */
export interface TlsConfig {
  tls: TlsSettings | undefined;
  allowInsecure: boolean;
}

/**
 * Turns the parsed env fields into settings. A certificate without its key (or the reverse) is a
 * configuration error, never a silent fall-back to cleartext.
 */
export function tlsFromEnv(c: TlsEnv): TlsConfig {
  const problems: string[] = [];
  if (!!c.TLS_CERT_FILE !== !!c.TLS_KEY_FILE) problems.push("TLS_CERT_FILE and TLS_KEY_FILE must be set together");
  if (c.TLS_CA_FILE && !c.TLS_CERT_FILE)
    problems.push("TLS_CA_FILE needs TLS_CERT_FILE and TLS_KEY_FILE (mutual TLS: this process presents a certificate too)");
  if (problems.length > 0) throw new ConfigError(problems);
  if (!c.TLS_CERT_FILE || !c.TLS_KEY_FILE) return { tls: undefined, allowInsecure: c.ALLOW_INSECURE };
  const tls: TlsSettings = {
    certFile: c.TLS_CERT_FILE,
    keyFile: c.TLS_KEY_FILE,
    caFile: c.TLS_CA_FILE,
    clientAuth: c.TLS_CLIENT_AUTH,
    reloadIntervalMs: c.TLS_RELOAD_INTERVAL_MS,
  };
  // Fail start-up (exit 78) on unreadable or mismatched files rather than at the first handshake.
  readTlsMaterial(tls);
  return { tls, allowInsecure: c.ALLOW_INSECURE };
}

/** The PEM contents of the configured files (key material: never logged). */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca: Buffer | undefined;
}

/** Reads and validates the files (a key that does not match its certificate is refused). */
export function readTlsMaterial(s: Pick<TlsSettings, "certFile" | "keyFile" | "caFile">): TlsMaterial {
  const read = (path: string, what: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new ConfigError([`${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`]);
    }
  };
  const m: TlsMaterial = {
    cert: read(s.certFile, "TLS_CERT_FILE"),
    key: read(s.keyFile, "TLS_KEY_FILE"),
    ca: s.caFile ? read(s.caFile, "TLS_CA_FILE") : undefined,
  };
  try {
    createSecureContext({ cert: m.cert, key: m.key, ...(m.ca ? { ca: m.ca } : {}) });
  } catch (err) {
    // The OpenSSL message names the problem (e.g. key values mismatch) without key material.
    throw new ConfigError([`TLS files ${s.certFile} / ${s.keyFile}: ${(err as Error).message}`]);
  }
  return m;
}

/** Options for http2.createSecureServer / setSecureContext. */
export function serverSecureOptions(m: TlsMaterial): SecureContextOptions {
  return { cert: m.cert, key: m.key, ...(m.ca ? { ca: m.ca } : {}) };
}

/**
 * Watches the TLS files and calls onChange with freshly read material when any of them changes.
 * A half-written rotation (cert and key not matching yet) is reported through onError and the
 * old context stays in place; the next change retries. Returns the function that stops watching.
 */
export function watchTlsFiles(s: TlsSettings, onChange: (m: TlsMaterial) => void, onError: (err: Error) => void): () => void {
  const files = [s.certFile, s.keyFile, ...(s.caFile ? [s.caFile] : [])];
  const listener = (cur: { mtimeMs: number; ino: number; size: number }, prev: { mtimeMs: number; ino: number; size: number }) => {
    if (cur.mtimeMs === prev.mtimeMs && cur.ino === prev.ino && cur.size === prev.size) return;
    try {
      onChange(readTlsMaterial(s));
    } catch (err) {
      onError(err as Error);
    }
  };
  for (const f of files) watchFile(f, { interval: s.reloadIntervalMs, persistent: false }, listener);
  return () => {
    for (const f of files) unwatchFile(f, listener);
  };
}

/** True for addresses only this machine can reach (where cleartext h2c is acceptable). */
export function isLoopbackHost(host: string): boolean {
  if (host === "localhost") return true;
  const bare = host.replace(/^\[|\]$/g, "");
  if (isIP(bare) === 4) return bare.startsWith("127.");
  if (isIP(bare) === 6) return bare === "::1";
  return false;
}

/**
 * Refuses unidentified callers on an address other machines can reach, unless explicitly allowed
 * (ALLOW_INSECURE=true, e.g. behind a mesh sidecar that terminates mTLS): cleartext, and TLS
 * without TLS_CA_FILE, which encrypts but identifies no caller, so authorization is off and the
 * payouts API sees every caller as one client (its keys and payouts shared by all). Throws
 * ConfigError (exit 78) so a forgotten Secret never silently exposes an unauthenticated payment API.
 */
export function assertTransportAllowed(host: string, c: TlsConfig): void {
  if (c.allowInsecure || isLoopbackHost(host)) return;
  if (!c.tls) {
    throw new ConfigError([
      `HOST=${host} is not a loopback address and no TLS is configured: set TLS_CERT_FILE, TLS_KEY_FILE and TLS_CA_FILE (mutual TLS), or ALLOW_INSECURE=true to serve cleartext h2c deliberately`,
    ]);
  }
  if (!c.tls.caFile) {
    throw new ConfigError([
      `HOST=${host} is not a loopback address and TLS has no TLS_CA_FILE: callers would not be identified (no authorization; every payouts caller one client). Set TLS_CA_FILE (mutual TLS), or ALLOW_INSECURE=true to accept unidentified callers deliberately`,
    ]);
  }
}

/**
 * Node options for a client transport (createGrpcTransport({ nodeOptions })): this process's
 * certificate as its client identity and the CA it trusts for servers. Undefined without TLS.
 * Read once when the client is built (client-side rotation = process restart; see docs/security.md).
 */
export function clientTlsOptions(s: Pick<TlsSettings, "certFile" | "keyFile" | "caFile"> | undefined): { cert: Buffer; key: Buffer; ca?: Buffer } | undefined {
  if (!s) return undefined;
  const m = readTlsMaterial(s);
  return { cert: m.cert, key: m.key, ...(m.ca ? { ca: m.ca } : {}) };
}
