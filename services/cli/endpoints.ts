/**
 * Where the CLI sends its calls. Precedence, per endpoint: flag > environment >
 * `.railfence/endpoints.json` (written by `npm start` in the project folder) > the service's
 * documented default port on 127.0.0.1 (which is what a `kubectl port-forward` gives).
 * Every resolved endpoint remembers its source, so `railfence endpoints` can explain a
 * surprising target instead of leaving the operator guessing.
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { UsageError } from "./exit-codes.js";

export type EndpointSource = "flag" | "env" | "file" | "default";

export interface Endpoint<T> {
  value: T;
  source: EndpointSource;
}

export interface ResolvedEndpoints {
  payouts?: Endpoint<string>;
  /** Every rail-proxy replica; calls go to the first reachable one. */
  railProxy?: Endpoint<string[]>;
  lock?: Endpoint<string>;
  /** Only `reconcile` needs it (the reconciler reads paydb itself). No default. */
  paydb?: Endpoint<string>;
  /** `check` reads paydb as the auditor (read-only role); falls back to paydb. No default. */
  paydbAudit?: Endpoint<string>;
  /** Informational (from the file only): the CLI never calls the rail. */
  rail?: Endpoint<string>;
  railControl?: Endpoint<string>;
  metrics?: Endpoint<Record<string, string>>;
  /** The operator's client certificate for mutual TLS (cert + key + CA file paths, one source). */
  tls?: Endpoint<TlsFiles>;
  /** The endpoints file consulted, and whether it existed. */
  file: { path: string; found: boolean };
}

export interface EndpointFlags {
  payouts?: string;
  railProxy?: string[];
  lock?: string;
  paydb?: string;
  endpointsFile?: string;
  tls?: Partial<TlsFiles>;
}

/** Paths of the files the CLI presents (cert, key) and trusts (ca) under mutual TLS. */
export interface TlsFiles {
  cert: string;
  key: string;
  ca?: string;
}

/** The environment variables the CLI reads, by endpoint. */
export const ENDPOINT_ENV = {
  payouts: "RAILFENCE_PAYOUTS_URL",
  railProxy: "RAILFENCE_RAIL_PROXY_URL",
  lock: "RAILFENCE_LOCK_URL",
  paydb: "RAILFENCE_PAYDB_URL",
  paydbAudit: "RAILFENCE_PAYDB_AUDIT_URL",
  endpointsFile: "RAILFENCE_ENDPOINTS_FILE",
  tlsCert: "RAILFENCE_TLS_CERT_FILE",
  tlsKey: "RAILFENCE_TLS_KEY_FILE",
  tlsCa: "RAILFENCE_TLS_CA_FILE",
} as const;

/** Documented default ports of the services (SPEC service contracts). */
export const DEFAULT_ENDPOINTS = {
  payouts: "http://127.0.0.1:7400",
  railProxy: ["http://127.0.0.1:7200"],
  lock: "http://127.0.0.1:7100",
} as const;

export const ENDPOINTS_FILE = join(".railfence", "endpoints.json");

interface FileEndpoints {
  paydb?: string;
  paydbAudit?: string;
  rail?: string;
  railProxy?: string[];
  lock?: string;
  payouts?: string;
  railControl?: string;
  metrics?: Record<string, string>;
  tls?: TlsFiles;
}

/** Reads and checks the endpoints file; a missing file is fine, a malformed one is a usage error. */
export function readEndpointsFile(path: string, read: (p: string) => string = (p) => readFileSync(p, "utf8")): FileEndpoints | undefined {
  let text: string;
  try {
    text = read(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new UsageError(`cannot read endpoints file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new UsageError(`endpoints file ${path} is not valid JSON`);
  }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new UsageError(`endpoints file ${path} must hold a JSON object`);
  const o = raw as Record<string, unknown>;
  const str = (k: string): string | undefined => {
    if (o[k] === undefined) return undefined;
    if (typeof o[k] !== "string") throw new UsageError(`endpoints file ${path}: "${k}" must be a URL string`);
    return o[k];
  };
  const out: FileEndpoints = { paydb: str("paydb"), paydbAudit: str("paydbAudit"), rail: str("rail"), lock: str("lock"), payouts: str("payouts"), railControl: str("railControl") };
  if (o.railProxy !== undefined) {
    // Accept a single string too: a hand-written file with one replica is a common shape.
    const list = typeof o.railProxy === "string" ? [o.railProxy] : o.railProxy;
    if (!Array.isArray(list) || !list.every((u) => typeof u === "string")) {
      throw new UsageError(`endpoints file ${path}: "railProxy" must be an array of URL strings`);
    }
    out.railProxy = list;
  }
  if (o.metrics !== undefined) {
    const m = o.metrics;
    if (!m || typeof m !== "object" || Array.isArray(m) || !Object.values(m).every((u) => typeof u === "string")) {
      throw new UsageError(`endpoints file ${path}: "metrics" must be an object of name -> URL`);
    }
    out.metrics = m as Record<string, string>;
  }
  if (o.tls !== undefined) {
    const t = o.tls as Record<string, unknown> | null;
    const ok = !!t && typeof t === "object" && typeof t.cert === "string" && typeof t.key === "string" && (t.ca === undefined || typeof t.ca === "string");
    if (!ok) throw new UsageError(`endpoints file ${path}: "tls" must be {"cert": path, "key": path, "ca": path}`);
    // Relative paths are relative to the file, so the file can be moved with its certificates.
    const at = (p: string) => resolve(dirname(path), p);
    out.tls = { cert: at(t.cert as string), key: at(t.key as string), ...(typeof t.ca === "string" ? { ca: at(t.ca) } : {}) };
  }
  return out;
}

/** Splits a comma-separated (or repeated) list of URLs, dropping empties. */
export function splitUrls(values: readonly string[]): string[] {
  return values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v.length > 0);
}

function checkServiceUrl(what: string, url: string, source: EndpointSource): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`${what} endpoint "${url}" (from ${source}) is not a URL; expected e.g. http://127.0.0.1:7200`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new UsageError(`${what} endpoint "${url}" (from ${source}) must be http:// or https://`);
  }
  return url.replace(/\/+$/, "");
}

function checkDbUrl(url: string, source: EndpointSource): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError(`paydb endpoint (from ${source}) is not a URL; expected postgres://user@host:5432/paydb`);
  }
  if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") {
    throw new UsageError(`paydb endpoint (from ${source}) must be a postgres:// URL`);
  }
  return url;
}

function pick<T>(candidates: Array<[EndpointSource, T | undefined]>): Endpoint<T> | undefined {
  for (const [source, value] of candidates) {
    if (value === undefined) continue;
    if (Array.isArray(value) && value.length === 0) continue;
    if (typeof value === "string" && value.trim() === "") continue;
    return { value, source };
  }
  return undefined;
}

/** Resolves every endpoint once, with its source; throws UsageError on a malformed one. */
export function resolveEndpoints(input: {
  flags: EndpointFlags;
  env: NodeJS.ProcessEnv;
  cwd: string;
  readFile?: (path: string) => string;
}): ResolvedEndpoints {
  const { flags, env, cwd } = input;
  const filePath = flags.endpointsFile ?? env[ENDPOINT_ENV.endpointsFile] ?? join(cwd, ENDPOINTS_FILE);
  const file = readEndpointsFile(filePath, input.readFile);
  const envList = env[ENDPOINT_ENV.railProxy] !== undefined ? splitUrls([env[ENDPOINT_ENV.railProxy]!]) : undefined;

  const service = (what: string, e: Endpoint<string> | undefined) => e && { ...e, value: checkServiceUrl(what, e.value, e.source) };
  const railProxy = pick<string[]>([
    ["flag", flags.railProxy && splitUrls(flags.railProxy)],
    ["env", envList],
    ["file", file?.railProxy],
    ["default", [...DEFAULT_ENDPOINTS.railProxy]],
  ]);
  const paydb = pick<string>([["flag", flags.paydb], ["env", env[ENDPOINT_ENV.paydb]], ["file", file?.paydb]]);
  const paydbAudit = pick<string>([["flag", flags.paydb], ["env", env[ENDPOINT_ENV.paydbAudit]], ["file", file?.paydbAudit]]) ?? paydb;
  const tls = pick<TlsFiles>([
    ["flag", tlsGroup("--tls-cert/--tls-key", flags.tls?.cert, flags.tls?.key, flags.tls?.ca)],
    ["env", tlsGroup(`${ENDPOINT_ENV.tlsCert}/${ENDPOINT_ENV.tlsKey}`, env[ENDPOINT_ENV.tlsCert], env[ENDPOINT_ENV.tlsKey], env[ENDPOINT_ENV.tlsCa])],
    ["file", file?.tls],
  ]);
  return {
    payouts: service("payouts", pick([["flag", flags.payouts], ["env", env[ENDPOINT_ENV.payouts]], ["file", file?.payouts], ["default", DEFAULT_ENDPOINTS.payouts]])),
    railProxy: railProxy && { ...railProxy, value: railProxy.value.map((u) => checkServiceUrl("rail-proxy", u, railProxy.source)) },
    lock: service("lock", pick([["flag", flags.lock], ["env", env[ENDPOINT_ENV.lock]], ["file", file?.lock], ["default", DEFAULT_ENDPOINTS.lock]])),
    paydb: paydb && { ...paydb, value: checkDbUrl(paydb.value, paydb.source) },
    paydbAudit: paydbAudit && { ...paydbAudit, value: checkDbUrl(paydbAudit.value, paydbAudit.source) },
    rail: file?.rail ? { value: file.rail, source: "file" } : undefined,
    railControl: file?.railControl ? { value: file.railControl, source: "file" } : undefined,
    metrics: file?.metrics ? { value: file.metrics, source: "file" } : undefined,
    tls,
    file: { path: filePath, found: file !== undefined },
  };
}

/** A certificate and its key come together (from one source); a CA alone is a usage error. */
function tlsGroup(what: string, cert: string | undefined, key: string | undefined, ca: string | undefined): TlsFiles | undefined {
  if (!cert && !key && !ca) return undefined;
  if (!cert || !key) throw new UsageError(`${what}: give the certificate and its key together (and the CA)`);
  return { cert, key, ...(ca ? { ca } : {}) };
}

/** A database URL safe to print: any password is replaced (secrets never reach a terminal log). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "****";
    return u.toString();
  } catch {
    return "(unparseable URL)";
  }
}
