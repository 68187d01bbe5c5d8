/** payouts configuration, read once from the environment. */
import { z } from "zod";
import { databaseUrl, env, loadConfig } from "../shared/config.js";
import { serverConfig, serverEnvShape, type ServerConfig } from "../shared/process-config.js";
import { ID_PATTERN } from "../shared/validation.js";

const DAY_MS = 86_400_000;

const schema = z.object({
  ...serverEnvShape(7400, 9400),
  PAYDB_URL: env.url(),
  PAYDB_PASSWORD_FILE: env.optionalFile(),
  PAYDB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(20),
  /** How long a successful answer stays pinned to its key (RESILIENCE.md: 24 h). */
  IDEMPOTENCY_RETENTION_MS: env.ms(DAY_MS, 100, 30 * DAY_MS),
  /** How often expired keys are deleted. */
  IDEMPOTENCY_PURGE_INTERVAL_MS: env.ms(60_000, 50, DAY_MS),
  /** Lease of an IN_PROGRESS marker: a request that crashed frees its key after this long. */
  IDEMPOTENCY_LOCK_MS: env.ms(30_000, 100, 3_600_000),
  /** The client identity of callers without a certificate (plain h2c on loopback); see caller-identity.ts. */
  PAYOUTS_DEFAULT_CLIENT_ID: z.string().regex(ID_PATTERN, "must be 1-64 characters of [A-Za-z0-9._:-]").default("local-default"),
  /** Identities (from client certificates) allowed to call the payouts API under mutual TLS. */
  PAYOUTS_CLIENT_IDENTITIES: z
    .string()
    .default("client,operator")
    .transform((s) => s.split(",").map((v) => v.trim()).filter((v) => v.length > 0))
    .pipe(z.array(z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "identities are 1-64 characters of [A-Za-z0-9._-]")).min(1, "name at least one identity")),
});

export interface PayoutsConfig extends ServerConfig {
  paydbUrl: string;
  paydbPoolMax: number;
  retentionMs: number;
  purgeIntervalMs: number;
  lockMs: number;
  defaultClientId: string;
  clientIdentities: string[];
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): PayoutsConfig {
  const c = loadConfig(schema, e);
  return {
    paydbUrl: databaseUrl(c.PAYDB_URL, c.PAYDB_PASSWORD_FILE, "PAYDB_PASSWORD_FILE"),
    paydbPoolMax: c.PAYDB_POOL_MAX,
    retentionMs: c.IDEMPOTENCY_RETENTION_MS,
    purgeIntervalMs: c.IDEMPOTENCY_PURGE_INTERVAL_MS,
    lockMs: c.IDEMPOTENCY_LOCK_MS,
    defaultClientId: c.PAYOUTS_DEFAULT_CLIENT_ID,
    clientIdentities: c.PAYOUTS_CLIENT_IDENTITIES,
    ...serverConfig(c),
  };
}
