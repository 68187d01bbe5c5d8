/** rail-stub configuration, read once from the environment. */
import { z } from "zod";
import { databaseUrl, env, loadConfig, readSecretFile } from "../shared/process/config.js";
import { serverConfig, serverEnvShape, type ServerConfig } from "../shared/process/process-config.js";

const schema = z.object({
  ...serverEnvShape(7300, 9300),
  /**
   * Port of the fault-injection control API (tests and drills; allowed in the image: the stub is a
   * development component, decision 015).
   * @default off
   */
  RAIL_STUB_CONTROL_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** raildb, the stub's own ledger (no password in the URL: see RAILDB_PASSWORD_FILE). */
  RAILDB_URL: env.url(),
  /** File holding raildb's password, if the URL needs one. */
  RAILDB_PASSWORD_FILE: env.optionalFile(),
  /** File holding the credential callers must present as `authorization: Bearer <credential>`. */
  RAIL_CREDENTIALS_FILE: z.string().min(1),
  /** Initial fault plan as JSON (same shape as SetFaultsRequest.rules; allowed in the image, as above). */
  RAIL_STUB_FAULTS: z.string().optional(),
  /**
   * Bookings written by one statement and one commit when calls arrive while an earlier booking is
   * in raildb (group commit, as railfence's own writers do: decision 068); each call still books
   * its own row before it is answered. 1: every booking its own statement.
   */
  RAIL_STUB_BATCH_MAX: z.coerce.number().int().min(1).max(1000).default(32),
});

export interface RailStubConfig extends ServerConfig {
  controlPort: number | undefined;
  raildbUrl: string;
  credential: string;
  faultsJson: string | undefined;
  batchMax: number;
}

export function readConfig(e: NodeJS.ProcessEnv = process.env): RailStubConfig {
  const c = loadConfig(schema, e);
  return {
    controlPort: c.RAIL_STUB_CONTROL_PORT,
    raildbUrl: databaseUrl(c.RAILDB_URL, c.RAILDB_PASSWORD_FILE, "RAILDB_PASSWORD_FILE"),
    credential: readSecretFile(c.RAIL_CREDENTIALS_FILE, "RAIL_CREDENTIALS_FILE"),
    faultsJson: c.RAIL_STUB_FAULTS,
    batchMax: c.RAIL_STUB_BATCH_MAX,
    ...serverConfig(c),
  };
}

/** The schema itself: the configuration reference (docs/configuration.md) is generated from it (tools/generate-config-doc.ts). */
export const configSchema = schema;
