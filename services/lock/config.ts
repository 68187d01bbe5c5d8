/** Lock service configuration, read once from the environment. */
import { z } from "zod";
import { databaseUrl, env, loadConfig } from "../shared/process/config.js";
import { signingKeyFromFile } from "../shared/process/token-signature.js";
import { serverConfig, serverEnvShape, type ServerConfig } from "../shared/process/process-config.js";
import type { BackendName } from "./lock-backend.js";
import { int8 } from "../shared/domain/int8.js";

/**
 * Largest accepted floor: leaves 2^62 tokens of headroom below the bigint ceiling (tokens are
 * stored as PostgreSQL bigint and etcd tokens add a revision to the floor).
 */
export const MAX_TOKEN_FLOOR = (1n << 62n) - 1n;

const schema = z
  .object({
    ...serverEnvShape(7100, 9100),
    /** Where the locks live: `pg` (lockdb) or `etcd`. */
    LOCK_BACKEND: z.enum(["pg", "etcd"]).default("pg"),
    /** lockdb, for the pg backend (required when LOCK_BACKEND=pg; no password in the URL). */
    LOCKDB_URL: z.string().min(1).optional(),
    /** File holding lockdb's password, if the URL needs one. */
    LOCKDB_PASSWORD_FILE: env.optionalFile(),
    /** lockdb connection pool size. */
    LOCKDB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(20),
    /**
     * Lock group commit (pg backend, decision 070): most acquire attempts (and, apart, renewals and
     * releases) in one lockdb statement and one commit. 1 = every call its own statement and
     * commit (the design before group commit; the benchmark compares the two).
     */
    LOCKDB_BATCH_MAX: z.coerce.number().int().min(1).max(1000).default(32),
    /** Lock group commit: statements of one kind (acquire, renew, release) in lockdb at once; calls arriving meanwhile form the next group. */
    LOCKDB_BATCHES_IN_FLIGHT: z.coerce.number().int().min(1).max(200).default(2),
    /**
     * How long a release may wait for the next group of acquire attempts to carry it into lockdb,
     * its commit shared with theirs (pg backend, decision 074); it leaves alone when that time is
     * up, at once when an acquire in this process waits for its key. 0 = every release its own
     * commit at once (the design before; the benchmark compares the two).
     */
    LOCKDB_RELEASE_CARRY_MS: z.coerce.number().int().min(0).max(1000).default(50),
    /** The etcd backend's endpoints: comma-separated http(s)://host:port (required when LOCK_BACKEND=etcd). */
    ETCD_ENDPOINTS: z.string().min(1).optional(),
    /** The etcd key prefix of the locks. */
    ETCD_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9._/-]{1,100}\/$/, "must be 1-100 characters of [A-Za-z0-9._/-] ending in /")
      .default("railfence/locks/"),
    /** Deadline of one backend call (lockdb statement timeout, etcd unary call deadline). */
    LOCK_BACKEND_TIMEOUT_MS: env.ms(2000, 100, 60_000),
    /** Every token issued is above this (set it to the previous backend's last token on a switch). */
    LOCK_TOKEN_FLOOR: z
      .string()
      .regex(/^\d{1,19}$/, "must be a non-negative integer")
      .default("0")
      .transform((v) => int8(v))
      .refine((v) => v <= MAX_TOKEN_FLOOR, `must be at most ${MAX_TOKEN_FLOOR}`),
    /** File holding a key shared with rail-proxy: every grant's token is signed with it, for rail-proxy to verify (docs/security.md). */
    LOCK_TOKEN_SIGNING_KEY_FILE: env.optionalFile(),
  })
  // Runs even when other fields are invalid (`when`), so start-up lists every problem at once;
  // it only reads the three string fields it checks.
  .superRefine(
    (c, ctx) => {
      if (c.LOCK_BACKEND === "pg" && !c.LOCKDB_URL) ctx.addIssue({ code: "custom", path: ["LOCKDB_URL"], message: "required when LOCK_BACKEND=pg" });
      if (c.LOCK_BACKEND === "etcd") {
        if (!c.ETCD_ENDPOINTS) {
          ctx.addIssue({ code: "custom", path: ["ETCD_ENDPOINTS"], message: "required when LOCK_BACKEND=etcd" });
        } else {
          for (const e of c.ETCD_ENDPOINTS.split(",")) {
            if (!/^https?:\/\/[^\s/]+(:\d+)?\/?$/.test(e.trim())) {
              ctx.addIssue({ code: "custom", path: ["ETCD_ENDPOINTS"], message: `not an http(s)://host:port endpoint: ${e.trim()}` });
            }
          }
        }
      }
    },
    { when: () => true },
  );

export interface LockConfig extends ServerConfig {
  backend: BackendName;
  lockdbUrl: string | undefined;
  lockdbPoolMax: number;
  lockdbBatchMax: number;
  lockdbBatchesInFlight: number;
  lockdbReleaseCarryMs: number;
  etcdEndpoints: string[];
  etcdPrefix: string;
  backendTimeoutMs: number;
  tokenFloor: bigint;
  /** Signs each grant's token when set (shared with rail-proxy). */
  tokenSigningKey: Buffer | undefined;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): LockConfig {
  const c = loadConfig(schema, e);
  return {
    backend: c.LOCK_BACKEND,
    lockdbUrl: c.LOCK_BACKEND === "pg" && c.LOCKDB_URL ? databaseUrl(c.LOCKDB_URL, c.LOCKDB_PASSWORD_FILE, "LOCKDB_PASSWORD_FILE") : undefined,
    lockdbPoolMax: c.LOCKDB_POOL_MAX,
    lockdbBatchMax: c.LOCKDB_BATCH_MAX,
    lockdbBatchesInFlight: c.LOCKDB_BATCHES_IN_FLIGHT,
    lockdbReleaseCarryMs: c.LOCKDB_RELEASE_CARRY_MS,
    etcdEndpoints: (c.ETCD_ENDPOINTS ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    etcdPrefix: c.ETCD_PREFIX,
    backendTimeoutMs: c.LOCK_BACKEND_TIMEOUT_MS,
    tokenFloor: c.LOCK_TOKEN_FLOOR,
    tokenSigningKey: signingKeyFromFile(c.LOCK_TOKEN_SIGNING_KEY_FILE, "LOCK_TOKEN_SIGNING_KEY_FILE"),
    ...serverConfig(c),
  };
}

/** The schema itself: the configuration reference (docs/configuration.md) is generated from it (tools/generate-config-doc.ts). */
export const configSchema = schema;
