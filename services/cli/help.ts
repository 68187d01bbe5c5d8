/**
 * Help text, generated from the command specs so it cannot drift from what is parsed.
 */
import type { CommandSpec } from "./command.js";

const GLOBAL_HELP = [
  "--json                  one machine-readable JSON object on stdout (errors: one on stderr)",
  "--payouts URL           payouts service      (env RAILFENCE_PAYOUTS_URL)",
  "--rail-proxy URL        rail-proxy replica; repeat or comma-separate (env RAILFENCE_RAIL_PROXY_URL)",
  "--lock URL              lock service         (env RAILFENCE_LOCK_URL)",
  "--paydb URL             paydb, for reconcile (env RAILFENCE_PAYDB_URL)",
  "--endpoints-file PATH   default ./.railfence/endpoints.json (env RAILFENCE_ENDPOINTS_FILE)",
  "--timeout-ms MS         per-call deadline (default 10000)",
  "--tls-cert/--tls-key/--tls-ca PATH  mutual TLS as the operator (env RAILFENCE_TLS_*_FILE; default: the endpoints file's tls)",
  "--help, -h              help for any command",
];

const EXIT_HELP = ["0 ok   1 the server refused (a Connect error)   2 usage error / not confirmed", "3 cannot reach the endpoint (unavailable)   4 not found"];

/** The top-level help: every command, global options, endpoint precedence, exit codes. */
export function generalHelp(commands: readonly CommandSpec[]): string {
  const width = Math.max(...commands.map((c) => c.words.join(" ").length));
  return [
    "railfence: operator CLI for the railfence payment-rail fencing mesh",
    "",
    "usage: railfence <command> [options]",
    "",
    "commands:",
    ...commands.map((c) => `  ${c.words.join(" ").padEnd(width)}  ${c.summary}`),
    `  ${"help [command]".padEnd(width)}  this text, or help for one command`,
    "",
    "global options:",
    ...GLOBAL_HELP.map((l) => `  ${l}`),
    "",
    "endpoints: flag > env > .railfence/endpoints.json > default 127.0.0.1 ports (see `railfence endpoints`)",
    "",
    "exit codes:",
    ...EXIT_HELP.map((l) => `  ${l}`),
  ].join("\n");
}

/** Help for the commands of one group (e.g. "submissions"). */
export function groupHelp(group: string, commands: readonly CommandSpec[]): string {
  const members = commands.filter((c) => c.words[0] === group);
  return [
    `railfence ${group} commands:`,
    ...members.map((c) => `  railfence ${c.usage}\n      ${c.summary}`),
    "",
    "run `railfence <command> --help` for details",
  ].join("\n");
}

/** Help for one command. */
export function commandHelp(c: CommandSpec): string {
  return [
    `usage: railfence ${c.usage}`,
    "",
    c.summary,
    ...(c.details?.length ? ["", "options:", ...c.details.map((d) => `  ${d}`)] : []),
    "",
    "global options:",
    ...GLOBAL_HELP.map((l) => `  ${l}`),
  ].join("\n");
}
