/**
 * The settings every railfence process shares, read the same way everywhere: where it listens
 * (HOST, PORT for servers, METRICS_PORT), how long it drains (DRAIN_MS) and its TLS. A service's
 * config spreads these into its own zod schema and its result.
 */
import { z } from "zod";
import { env } from "./config.js";
import { LIMITS } from "../domain/limits.js";
import { assertTransportAllowed, tlsEnvShape, tlsFromEnv, type TlsConfig, type TlsEnv } from "./tls.js";

/**
 * Which RPC stack unary calls take (decision 006): the direct gRPC path (default) or
 * connect-node's pipeline. RAILFENCE_CONNECT_UNARY=1 (or `both`) keeps both sides on
 * connect-node, `server` or `client` one side: the bench's comparison layouts, and a way back
 * should the direct path ever misbehave.
 */
export interface RpcStack {
  /** This process's servers answer unary gRPC calls on the direct path. */
  directServer: boolean;
  /** This process's clients send unary calls on the direct path. */
  directClient: boolean;
}

const rpcStackEnv = z
  .enum(["", "0", "1", "both", "server", "client"], { message: "RAILFENCE_CONNECT_UNARY is one of 0, 1, both, server, client (unset: direct on both sides)" })
  .default("");

/** The stack a RAILFENCE_CONNECT_UNARY value selects. */
export function rpcStackOf(value: z.infer<typeof rpcStackEnv>): RpcStack {
  const connect = (side: "server" | "client") => value === "1" || value === "both" || value === side;
  return { directServer: !connect("server"), directClient: !connect("client") };
}

/** Env fields of any process (servers add PORT with serverEnvShape). */
export const processEnvShape = (metricsPort: number) => ({
  /**
   * The RPC stack of unary calls: unset = the direct gRPC path; `1` or `both`, `server` or
   * `client` = connect-node on that side (the bench's layouts, decision 006).
   */
  RAILFENCE_CONNECT_UNARY: rpcStackEnv,
  /** The address this process listens on; a server on a non-loopback address needs mutual TLS or ALLOW_INSECURE (docs/security.md). */
  HOST: env.host(),
  /** Port of the metrics endpoint (0 = pick a free port; the bound ports are in the `"event":"ready"` log line). */
  METRICS_PORT: env.port(metricsPort),
  /** Bound of the graceful drain on SIGTERM: how long in-flight work may take to finish. */
  DRAIN_MS: env.ms(10_000),
  ...tlsEnvShape,
});

/** Env fields of a process that serves RPCs. READ_TIMEOUT_MS may lower the request body deadline, never raise it. */
export const serverEnvShape = (port: number, metricsPort: number) => ({
  /** Port of the RPC server (0 = pick a free port; the bound port is in the `"event":"ready"` log line). */
  PORT: env.port(port),
  /** How long a request body may take to arrive; lowers the ceiling, never raises it (docs/limits.md). */
  READ_TIMEOUT_MS: env.ms(LIMITS.readTimeoutMs, 100, LIMITS.readTimeoutMs),
  ...processEnvShape(metricsPort),
});

export interface ProcessConfig {
  host: string;
  metricsPort: number;
  drainMs: number;
  /** TLS / mutual TLS of this process (services/shared/process/tls.ts). */
  transport: TlsConfig;
  /** RAILFENCE_CONNECT_UNARY: the RPC stack of unary calls. */
  rpcStack: RpcStack;
}

export interface ServerConfig extends ProcessConfig {
  port: number;
  /** Longest wait for a complete request body (services/shared/edge/request-gate.ts). */
  readTimeoutMs: number;
}

type ProcessEnv = TlsEnv & { HOST: string; METRICS_PORT: number; DRAIN_MS: number; RAILFENCE_CONNECT_UNARY: z.infer<typeof rpcStackEnv> };

/** The shared part of a parsed config; throws ConfigError on an incomplete TLS setup. */
export function processConfig(c: ProcessEnv): ProcessConfig {
  return { host: c.HOST, metricsPort: c.METRICS_PORT, drainMs: c.DRAIN_MS, transport: tlsFromEnv(c), rpcStack: rpcStackOf(c.RAILFENCE_CONNECT_UNARY) };
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
