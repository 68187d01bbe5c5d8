/**
 * One-shot migration job: `node dist/services/migrate/main.js paydb|lockdb|raildb`.
 * Used by the Helm pre-install/pre-upgrade hook and by operators. Safe to run concurrently
 * (the runner holds an advisory lock). Env: DATABASE_URL, DATABASE_PASSWORD_FILE (optional).
 */
import { z } from "zod";
import { databaseUrl, loadConfig } from "../shared/config.js";
import { createLogger } from "../shared/logger.js";
import { runMain } from "../shared/lifecycle.js";
import { migrate, type DatabaseKind } from "../shared/migrate.js";

const logger = createLogger("migrate");

runMain(logger, async () => {
  const kinds = process.argv.slice(2);
  const valid: DatabaseKind[] = ["paydb", "lockdb", "raildb"];
  const c = loadConfig(
    z.object({
      DATABASE_URL: z.string().min(1),
      DATABASE_PASSWORD_FILE: z.string().min(1).optional(),
      KINDS: z.array(z.enum(valid)).min(1, "name at least one database: paydb, lockdb or raildb"),
    }),
    { ...process.env, KINDS: kinds } as unknown as NodeJS.ProcessEnv,
  );
  const url = databaseUrl(c.DATABASE_URL, c.DATABASE_PASSWORD_FILE, "DATABASE_PASSWORD_FILE");
  for (const kind of c.KINDS) {
    const applied = await migrate(url, kind);
    logger.info({ event: "migrated", database: kind, applied }, applied.length ? `applied ${applied.join(", ")}` : "up to date");
  }
});
