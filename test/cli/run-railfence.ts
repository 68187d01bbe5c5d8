/**
 * Runs the compiled `railfence` CLI (through bin/railfence.js, the installed entry) as a real
 * process, with a clean environment (no inherited RAILFENCE_* settings) and its own cwd.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { projectRoot } from "../../services/shared/process/project-root.js";

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export const BIN = join(projectRoot(), "bin", "railfence.js");

export function railfence(args: string[], opts: { cwd: string; env?: Record<string, string>; input?: string }): Promise<CliResult> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("RAILFENCE_")) env[k] = v;
  Object.assign(env, opts.env);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd, env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
    if (opts.input !== undefined) child.stdin.write(opts.input);
    child.stdin.end();
  });
}
