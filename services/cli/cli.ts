/**
 * The CLI's dispatcher: parse, pick the command, check its options and positionals, resolve
 * endpoints, run it, and turn every failure into a message plus an exit code. It takes its
 * world (argv, env, cwd, output, prompt) as arguments so it runs the same in tests as in a
 * terminal; main.ts is the only file that touches `process`.
 */
import { readFileSync } from "node:fs";
import { GLOBAL_OPTIONS, Options, parseLine } from "./args.js";
import { CallFailed, Connections } from "./clients.js";
import type { CommandContext, CommandSpec } from "./command.js";
import { endpointCommands } from "./endpoints-command.js";
import { resolveEndpoints, type TlsFiles } from "./endpoints.js";
import { describeError, formatErrorReport } from "./error-report.js";
import { EXIT_OK, EXIT_REFUSED, EXIT_USAGE, UsageError } from "./exit-codes.js";
import { commandHelp, generalHelp, groupHelp } from "./help.js";
import { lockCommands } from "./locks-commands.js";
import type { Output } from "./output.js";
import { payoutCommands } from "./payouts-commands.js";
import { reconcileCommands } from "./reconcile-command.js";
import { submissionCommands } from "./submissions-commands.js";
import { traceCommands } from "./trace-command.js";
import { checkCommands } from "./check-command.js";

/** Every command, in help order. */
export const COMMANDS: readonly CommandSpec[] = [
  ...payoutCommands,
  ...submissionCommands,
  ...lockCommands,
  ...reconcileCommands,
  ...checkCommands,
  ...traceCommands,
  ...endpointCommands,
];

export const DEFAULT_TIMEOUT_MS = 10_000;

export interface CliWorld {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  output: Output;
  confirm(question: string): Promise<boolean>;
}

/** The command whose words are the longest prefix of the positionals. */
export function findCommand(positionals: readonly string[]): CommandSpec | undefined {
  let best: CommandSpec | undefined;
  for (const c of COMMANDS) {
    if (c.words.every((w, i) => positionals[i] === w) && (!best || c.words.length > best.words.length)) best = c;
  }
  return best;
}

const GROUPS = new Set(COMMANDS.filter((c) => c.words.length > 1).map((c) => c.words[0]!));

/** Prints help for `railfence help [words...]`; unknown topics are usage errors. */
function help(words: readonly string[], output: Output): number {
  if (words.length === 0) {
    output.out(generalHelp(COMMANDS));
    return EXIT_OK;
  }
  const c = findCommand(words);
  if (c && c.words.length === words.length) output.out(commandHelp(c));
  else if (words.length === 1 && GROUPS.has(words[0]!)) output.out(groupHelp(words[0]!, COMMANDS));
  else throw new UsageError(`no such command: ${words.join(" ")}`, "railfence help");
  return EXIT_OK;
}

/** Runs one invocation; resolves with the exit code (it never calls process.exit). */
export async function runCli(world: CliWorld): Promise<number> {
  const { output } = world;
  let json = world.argv.includes("--json");
  try {
    const line = parseLine(world.argv);
    const opts = new Options(line.values);
    json = opts.flag("json");
    const [first, ...rest] = line.positionals;
    if (first === undefined) {
      if (opts.flag("help")) return help([], output);
      output.err(generalHelp(COMMANDS));
      return EXIT_USAGE;
    }
    if (first === "help") return help(rest, output);

    const command = findCommand(line.positionals);
    if (!command) {
      if (GROUPS.has(first) && rest.length === 0 && opts.flag("help")) return help([first], output);
      if (GROUPS.has(first)) {
        const verbs = COMMANDS.filter((c) => c.words[0] === first).map((c) => c.words[1]);
        throw new UsageError(
          rest.length ? `unknown command: ${first} ${rest[0]}` : `${first} needs a command`,
          `railfence ${first} ${verbs.join("|")} ... (railfence help ${first})`,
        );
      }
      throw new UsageError(`unknown command: ${first}`, "railfence help");
    }
    if (opts.flag("help")) return help(command.words, output);

    const usage = `railfence ${command.usage}`;
    const allowed = new Set([...GLOBAL_OPTIONS, ...command.options]);
    const stray = opts.given().filter((o) => !allowed.has(o));
    if (stray.length) throw new UsageError(`${command.words.join(" ")} does not take ${stray.map((o) => `--${o}`).join(", ")}`, usage);
    const args = line.positionals.slice(command.words.length);
    if (args.length !== command.positionals) {
      throw new UsageError(args.length < command.positionals ? "missing argument" : `unexpected argument: ${args[command.positionals]}`, usage);
    }

    const endpoints = resolveEndpoints({
      flags: {
        payouts: opts.string("payouts"),
        railProxy: opts.list("rail-proxy"),
        lock: opts.string("lock"),
        paydb: opts.string("paydb"),
        endpointsFile: opts.string("endpoints-file"),
        tls: { cert: opts.string("tls-cert"), key: opts.string("tls-key"), ca: opts.string("tls-ca") },
      },
      env: world.env,
      cwd: world.cwd,
    });
    const timeoutMs = opts.integer("timeout-ms", 1, 600_000) ?? DEFAULT_TIMEOUT_MS;
    const connections = new Connections(timeoutMs, readTlsFiles(endpoints.tls?.value));
    const ctx: CommandContext = { output, opts, args, json, endpoints, connections, env: world.env, confirm: world.confirm };
    try {
      return await runWithUsage(command, ctx, usage);
    } finally {
      connections.close();
    }
  } catch (err) {
    return report(err, output, json);
  }
}

async function runWithUsage(command: CommandSpec, ctx: CommandContext, usage: string): Promise<number> {
  try {
    return await command.run(ctx);
  } catch (err) {
    // Option-value mistakes found inside a command still deserve the usage line.
    if (err instanceof UsageError && !err.usage) throw new UsageError(err.message, usage);
    throw err;
  }
}

function report(err: unknown, output: Output, json: boolean): number {
  if (err instanceof UsageError) {
    if (json) output.err(JSON.stringify({ error: { code: "usage", message: err.message, usage: err.usage ?? "" } }, null, 2));
    else output.err(`error: ${err.message}${err.usage ? `\nusage: ${err.usage}` : ""}`);
    return EXIT_USAGE;
  }
  if (err instanceof CallFailed) {
    const r = describeError(err.error, err.endpoint, err.hasEffect);
    if (json) output.err(JSON.stringify({ error: { ...r, ...err.context } }, null, 2));
    else output.err(formatErrorReport(r));
    return r.exitCode;
  }
  // A bug in the CLI itself: say so plainly rather than pretend the server refused.
  const message = err instanceof Error ? err.message : String(err);
  if (json) output.err(JSON.stringify({ error: { code: "internal", message } }, null, 2));
  else output.err(`error: internal CLI failure: ${message}`);
  return EXIT_REFUSED;
}

/** Reads the operator's TLS files (a missing one is a usage error naming it). */
function readTlsFiles(files: TlsFiles | undefined): { cert: Buffer; key: Buffer; ca?: Buffer } | undefined {
  if (!files) return undefined;
  const read = (p: string, what: string) => {
    try {
      return readFileSync(p);
    } catch (err) {
      throw new UsageError(`cannot read the TLS ${what} ${p}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
  };
  return { cert: read(files.cert, "certificate"), key: read(files.key, "key"), ...(files.ca ? { ca: read(files.ca, "CA") } : {}) };
}
