/**
 * Config helpers: every service reads its environment once, validates it with zod, and fails
 * start-up with one message that lists every problem (not just the first).
 */
import { readFileSync } from "node:fs";
import { z } from "zod";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
  }
}

/** Parses env with schema; throws ConfigError listing every problem. Result is frozen. */
export function loadConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): Readonly<z.infer<S>> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join(".") || "(env)"}: ${i.message}`));
  }
  return Object.freeze(parsed.data);
}

/** Common env fragments. */
export const env = {
  port: (dflt: number) => z.coerce.number().int().min(0).max(65535).default(dflt),
  host: () => z.string().min(1).default("127.0.0.1"),
  bool: (dflt: boolean) =>
    z
      .enum(["true", "false", "1", "0"])
      .default(dflt ? "true" : "false")
      .transform((v) => v === "true" || v === "1"),
  ms: (dflt: number, min = 0, max = 3_600_000) => z.coerce.number().int().min(min).max(max).default(dflt),
  url: () => z.string().min(1),
  /** Comma-separated http(s) base URLs (e.g. every rail-proxy replica), at least one. */
  urlList: (what: string) =>
    z
      .string()
      .min(1)
      .transform((s) =>
        s
          .split(",")
          .map((u) => u.trim())
          .filter((u) => u.length > 0),
      )
      .pipe(z.array(z.url({ protocol: /^https?$/ })).min(1, `name at least one ${what} URL`)),
  optionalFile: () => z.string().min(1).optional(),
};

/**
 * Reads a secret from a file (a Kubernetes Secret volume). Secrets never come from argv or env
 * values, so they never appear in `ps`, env dumps or crash reports. Trailing newline trimmed.
 */
export function readSecretFile(path: string, what: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError([`${what}: cannot read secret file ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`]);
  }
  const value = text.replace(/\r?\n$/, "");
  if (value.length === 0) throw new ConfigError([`${what}: secret file ${path} is empty`]);
  return value;
}

/** Builds a database URL from a URL without password plus an optional password file. */
export function databaseUrl(url: string, passwordFile: string | undefined, what: string): string {
  if (!passwordFile) return url;
  const u = new URL(url);
  u.password = encodeURIComponent(readSecretFile(passwordFile, what));
  return u.toString();
}
