/**
 * What a "clean" answer to hostile input is, in one place: a ConnectError with an allowed code,
 * never `internal`/`unknown`, a google.rpc.ErrorInfo (domain railfence.dev, UPPER_SNAKE reason)
 * for every refusal a handler makes, a named field for every invalid_argument, and a message
 * that carries nothing from inside the process (SQL, connection strings, stack frames, secrets).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import { errorInfo } from "../../services/shared/domain/errors.js";

/** Text that must never reach a client: it would mean an internal error leaked through. */
export const LEAK_PATTERNS: readonly RegExp[] = [
  /postgres(ql)?:\/\//i,
  /\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM)\b/,
  /\bat [\w.<>]+ \(?(file:|node:|\/)/, // stack frame
  /\.(js|ts):\d+:\d+/,
  /ECONNREFUSED|ECONNRESET|EPIPE/,
  /\b(relation|column) "\w+"/,
  /violates|duplicate key value|invalid input syntax|out of range for type/i,
  /rk_[0-9a-f]{16,}/, // rail credentials as the harness writes them
  /Bearer /,
];

export const UPPER_SNAKE = /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/;

/** Asserts text carries nothing from inside a process. */
export function expectNoLeak(text: string, what: string): void {
  for (const p of LEAK_PATTERNS) expect(p.test(text), `${what} leaks ${p}: ${text.slice(0, 300)}`).toBe(false);
}

export interface CleanErrorOptions {
  /** Codes this case may answer with. */
  codes: readonly Code[];
  /**
   * Every refusal a server makes carries ErrorInfo, framework refusals included. Only an error
   * the client made itself (it cancelled its own call) has none: set false for those alone.
   */
  requireInfo?: boolean;
  /** When set, the ErrorInfo reason must be one of these. */
  reasons?: readonly string[];
  /** When set, an invalid_argument must name exactly this field. */
  field?: string;
}

/** Asserts err is a clean refusal and returns it as a ConnectError. */
export function expectCleanError(err: unknown, opts: CleanErrorOptions, what: string): ConnectError {
  expect(err, `${what}: expected a ConnectError, got ${String(err)}`).toBeInstanceOf(ConnectError);
  const ce = err as ConnectError;
  const label = `${what}: ${Code[ce.code]} "${ce.rawMessage.slice(0, 200)}"`;
  expect(ce.code, label).not.toBe(Code.Internal);
  expect(ce.code, label).not.toBe(Code.Unknown);
  expect(
    opts.codes.map((c) => Code[c]),
    label,
  ).toContain(Code[ce.code]);
  expectNoLeak(ce.rawMessage, what);
  const info = errorInfo(ce);
  if (opts.requireInfo ?? true) {
    expect(info, `${label}: no ErrorInfo`).toBeDefined();
    expect(info!.domain, label).toBe("railfence.dev");
    expect(info!.reason, label).toMatch(UPPER_SNAKE);
    if (opts.reasons) expect(opts.reasons, label).toContain(info!.reason);
    if (ce.code === Code.InvalidArgument && info!.reason === "MALFORMED_REQUEST") {
      // A body that is not a message at all may have no field to blame; it names the problem.
      expect(info!.metadata.problem ?? "", `${label}: MALFORMED_REQUEST must name the problem`).not.toBe("");
    } else if (ce.code === Code.InvalidArgument && info!.reason === "REQUEST_TOO_LARGE") {
      // The whole message is too large (invalid_argument since decision 053): it names the limit, not a field.
      expect(info!.metadata.limit_bytes ?? "", `${label}: REQUEST_TOO_LARGE must name the limit`).toMatch(/^\d+$/);
    } else if (ce.code === Code.InvalidArgument) {
      expect(info!.metadata.field ?? "", `${label}: invalid_argument must name the field`).not.toBe("");
      if (opts.field !== undefined) expect(info!.metadata.field, label).toBe(opts.field);
    }
  }
  for (const [k, v] of Object.entries(info?.metadata ?? {})) expectNoLeak(`${k}=${v}`, `${what} metadata`);
  return ce;
}

/** Runs a call and returns its answer or its error, never throwing. */
export async function settle<T>(call: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await call };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Bounds a promise: a hang past boundMs fails the case instead of the whole run. */
export async function bounded<T>(p: Promise<T>, boundMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${boundMs} ms (hang)`)), boundMs);
  });
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}
