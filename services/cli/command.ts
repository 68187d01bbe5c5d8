/**
 * What a command is, and what it is given. Commands receive everything through the context
 * (output, endpoints, connections, prompt), never from globals, so tests can run them in
 * process and the composition root (main.ts) is the only place that touches `process`.
 */
import type { OptionName, Options } from "./args.js";
import type { Connections } from "./clients.js";
import type { ResolvedEndpoints } from "./endpoints.js";
import type { Output } from "./output.js";

export interface CommandContext {
  output: Output;
  opts: Options;
  /** Positionals after the command words (e.g. the payout id). */
  args: string[];
  json: boolean;
  endpoints: ResolvedEndpoints;
  connections: Connections;
  env: NodeJS.ProcessEnv;
  /** Asks a yes/no question on the terminal; false when declined or when stdin ends. */
  confirm(question: string): Promise<boolean>;
}

export interface CommandSpec {
  /** Command words, e.g. ["submissions", "resolve"]. */
  words: readonly string[];
  /** Usage line after "railfence ", e.g. "submissions get <payout_id>". */
  usage: string;
  summary: string;
  /** Longer help: options and notes, one per line. */
  details?: readonly string[];
  /** Command-specific options accepted besides the global ones. */
  options: readonly OptionName[];
  /** Exact number of positionals after the command words. */
  positionals: number;
  run(ctx: CommandContext): Promise<number>;
}
