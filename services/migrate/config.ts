/**
 * The migration job's environment (the databases to migrate come from argv, main.ts). The login
 * roles it provisions are read separately, per component (login-config.ts).
 */
import { z } from "zod";

export const configSchema = z.object({
  /** The database to migrate, logged in as its owner (no password in the URL: see DATABASE_PASSWORD_FILE). */
  DATABASE_URL: z.string().min(1),
  /** File holding the owner's password, if the URL needs one. */
  DATABASE_PASSWORD_FILE: z.string().min(1).optional(),
  /**
   * paydb only: file holding the lock's token-signing key, installed in paydb, which then verifies
   * every new payout fence with it (migration 014).
   */
  TOKEN_SIGNING_KEY_FILE: z.string().min(1).optional(),
});
