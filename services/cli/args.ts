/**
 * Command-line parsing on node:util parseArgs (no CLI framework dependency).
 *
 * One option table covers every command, so options may appear anywhere on the line
 * (`railfence --json submissions get p-1` and `railfence submissions get p-1 --json` are the
 * same). After parsing, the chosen command checks that it accepts each option given, so a
 * typo or an option meant for another command is a usage error, never silently ignored.
 */
import { parseArgs } from "node:util";
import { UsageError } from "./exit-codes.js";

/** Every option any command knows; `multiple` options may be repeated. */
export const OPTIONS = {
  // global
  help: { type: "boolean", short: "h" },
  json: { type: "boolean" },
  payouts: { type: "string" },
  "rail-proxy": { type: "string", multiple: true },
  lock: { type: "string" },
  paydb: { type: "string" },
  "endpoints-file": { type: "string" },
  "timeout-ms": { type: "string" },
  // mutual TLS: the operator's certificate, its key, and the CA the services' certificates chain to
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-ca": { type: "string" },
  // payouts
  account: { type: "string" },
  amount: { type: "string" },
  currency: { type: "string" },
  beneficiary: { type: "string" },
  "client-reference": { type: "string" },
  "idempotency-key": { type: "string" },
  state: { type: "string" },
  "page-size": { type: "string" },
  "page-token": { type: "string" },
  // submissions resolve
  outcome: { type: "string" },
  actor: { type: "string" },
  note: { type: "string" },
  yes: { type: "boolean", short: "y" },
  "rail-reference": { type: "string" },
  force: { type: "boolean" },
  // reconcile
  "dry-run": { type: "boolean" },
  "settlement-window-ms": { type: "string" },
  // trace
  "trace-file": { type: "string" },
  // check
  since: { type: "string" },
  until: { type: "string" },
  quiescent: { type: "boolean" },
  "max-rows": { type: "string" },
  "max-open-age": { type: "string" },
} as const;

export type OptionName = keyof typeof OPTIONS;

/** Options every command accepts (output mode, endpoints, timeouts, help). */
export const GLOBAL_OPTIONS: readonly OptionName[] = [
  "help",
  "json",
  "payouts",
  "rail-proxy",
  "lock",
  "paydb",
  "endpoints-file",
  "timeout-ms",
  "tls-cert",
  "tls-key",
  "tls-ca",
];

export interface ParsedLine {
  positionals: string[];
  /** Only the options that were actually given (no defaults are filled in here). */
  values: Partial<Record<OptionName, string | boolean | string[]>>;
}

/** Parses argv (without node and script); unknown options and missing values are UsageErrors. */
export function parseLine(argv: readonly string[]): ParsedLine {
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: true });
    return { positionals, values: values as ParsedLine["values"] };
  } catch (err) {
    // parseArgs messages are already user-facing ("Unknown option '--x'..."); keep them.
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** Typed access to the options of one parsed line, with the checks every command needs. */
export class Options {
  constructor(private readonly values: ParsedLine["values"]) {}

  /** Names of the options that were given. */
  given(): OptionName[] {
    return Object.keys(this.values) as OptionName[];
  }

  flag(name: OptionName): boolean {
    return this.values[name] === true;
  }

  string(name: OptionName): string | undefined {
    const v = this.values[name];
    if (Array.isArray(v)) return v[v.length - 1];
    return typeof v === "string" ? v : undefined;
  }

  list(name: OptionName): string[] | undefined {
    const v = this.values[name];
    if (v === undefined || typeof v === "boolean") return undefined;
    return Array.isArray(v) ? v : [v];
  }

  /** A required string option; an empty value counts as missing. */
  required(name: OptionName): string {
    const v = this.string(name);
    if (v === undefined || v.trim() === "") throw new UsageError(`--${name} is required`);
    return v;
  }

  /** A non-negative integer option within [min, max]. */
  integer(name: OptionName, min: number, max: number): number | undefined {
    const v = this.string(name);
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got "${v}"`);
    }
    return Number(v);
  }
}
