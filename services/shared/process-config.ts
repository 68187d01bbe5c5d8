/**
 * The settings every railfence process shares, read the same way everywhere: where it listens
 * (HOST, PORT for servers, METRICS_PORT), how long it drains (DRAIN_MS) and its TLS. A service's
 * config spreads these into its own zod schema and its result.
 */
import { env } from "./config.js";
import { LIMITS } from "./limits.js";
import { assertTransportAllowed, tlsEnvShape, tlsFromEnv, type TlsConfig, type TlsEnv } from "./tls.js";

/** Env fields of any process (servers add PORT with serverEnvShape). */
export const processEnvShape = (metricsPort: number) => ({
  HOST: env.host(),
  METRICS_PORT: env.port(metricsPort),
  DRAIN_MS: env.ms(10_000),
  ...tlsEnvShape,
});

/** Env fields of a process that serves RPCs. READ_TIMEOUT_MS may lower the request body deadline, never raise it. */
export const serverEnvShape = (port: number, metricsPort: number) => ({
  PORT: env.port(port),
  READ_TIMEOUT_MS: env.ms(LIMITS.readTimeoutMs, 100, LIMITS.readTimeoutMs),
  ...processEnvShape(metricsPort),
});

export interface ProcessConfig {
  host: string;
  metricsPort: number;
  drainMs: number;
  /** TLS / mutual TLS of this process (services/shared/tls.ts). */
  transport: TlsConfig;
}

export interface ServerConfig extends ProcessConfig {
  port: number;
  /** Longest wait for a complete request body (services/shared/request-gate.ts). */
  readTimeoutMs: number;
}

type ProcessEnv = TlsEnv & { HOST: string; METRICS_PORT: number; DRAIN_MS: number };

/** The shared part of a parsed config; throws ConfigError on an incomplete TLS setup. */
export function processConfig(c: ProcessEnv): ProcessConfig {
  return { host: c.HOST, metricsPort: c.METRICS_PORT, drainMs: c.DRAIN_MS, transport: tlsFromEnv(c) };
}

/**
 * A server's shared config. Cleartext on a non-loopback HOST is refused here, with the other
 * configuration errors (exit 78), before the service touches a database: `docker run` without
 * TLS and without ALLOW_INSECURE must say so, not fail later on whatever it reaches first.
 */
export function serverConfig(c: ProcessEnv & { PORT: number; READ_TIMEOUT_MS: number }): ServerConfig {
  const shared = processConfig(c);
  assertTransportAllowed(shared.host, shared.transport);
  return { port: c.PORT, readTimeoutMs: c.READ_TIMEOUT_MS, ...shared };
}
