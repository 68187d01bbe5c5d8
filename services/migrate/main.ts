/**
 * One-shot migration job: `node dist/services/migrate/main.js paydb|lockdb|raildb ...`.
 * Used by the Helm pre-install/pre-upgrade hook and by operators. Safe to run concurrently
 * (the runner holds an advisory lock). Env: DATABASE_URL (logged in as the owner),
 * DATABASE_PASSWORD_FILE (optional), LOGIN_<COMPONENT>_USER / _PASSWORD_FILE for the login
 * roles to create or update after migrating (login-config.ts, login-roles.ts), and
 * TOKEN_SIGNING_KEY_FILE (optional, paydb only): the lock service's token-signing key, which
 * paydb then verifies every new payout fence with (migration 014).
 */
import { z } from "zod";
import { databaseUrl, loadConfig } from "../shared/process/config.js";
import { createLogger } from "../shared/process/logger.js";
import { runMain } from "../shared/observability/lifecycle.js";
import { installFenceSigningKey, migrate, type DatabaseKind } from "../shared/db/migrate.js";
import { signingKeyFromFile } from "../shared/process/token-signature.js";
import { configSchema } from "./config.js";
import { readLogins } from "./login-config.js";
import { provisionLogins } from "./login-roles.js";

const logger = createLogger("migrate");

runMain(logger, async () => {
  const kinds = process.argv.slice(2);
  const valid: DatabaseKind[] = ["paydb", "lockdb", "raildb"];
  const c = loadConfig(configSchema.extend({ KINDS: z.array(z.enum(valid)).min(1, "name at least one database: paydb, lockdb or raildb") }), {
    ...process.env,
    KINDS: kinds,
  } as unknown as NodeJS.ProcessEnv);
  const owner = URL.canParse(c.DATABASE_URL) ? decodeURIComponent(new URL(c.DATABASE_URL).username) || undefined : undefined;
  // Read and checked before anything changes: a bad login setting migrates nothing.
  const logins = readLogins(process.env, c.KINDS, owner);
  const url = databaseUrl(c.DATABASE_URL, c.DATABASE_PASSWORD_FILE, "DATABASE_PASSWORD_FILE");
  const fenceKey = signingKeyFromFile(c.TOKEN_SIGNING_KEY_FILE, "TOKEN_SIGNING_KEY_FILE");
  for (const kind of c.KINDS) {
    const applied = await migrate(url, kind);
    logger.info({ event: "migrated", database: kind, applied }, applied.length ? `applied ${applied.join(", ")}` : "up to date");
    if (kind === "paydb" && fenceKey) {
      const action = await installFenceSigningKey(url, fenceKey);
      logger.info({ event: "fence_signing_key", database: kind, action }, `paydb verifies payout fences with the token-signing key (${action})`);
    }
    for (const r of await provisionLogins(url, kind, logins.get(kind) ?? [])) {
      logger.info(
        {
          event: "login_provisioned",
          database: kind,
          component: r.component,
          role: r.user,
          group: r.group,
          action: r.action,
          password: r.passwordSet ? "set" : "unchanged",
        },
        `login ${r.user} ${r.action} (member of ${r.group} only)`,
      );
    }
  }
});
