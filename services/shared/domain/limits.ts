/**
 * Every server limit in one place: the shared server reads them, each service's composition
 * root takes its request size from REQUEST_MAX_BYTES, and docs/limits.md's table is rendered
 * from this file (limits.test.ts fails when the README drifts). Change a number here, and only here.
 */

/** Largest request message each server accepts (bytes of the message, not of the HTTP/2 body). */
export const REQUEST_MAX_BYTES = {
  "rail-proxy": 16 * 1024,
  payouts: 16 * 1024,
  lock: 4 * 1024,
  "rail-stub": 64 * 1024,
  "rail-stub-control": 64 * 1024,
} as const;

export type ServerName = keyof typeof REQUEST_MAX_BYTES;

/** Limits shared by every server. */
export const LIMITS = {
  writeMaxBytes: 4 * 1024 * 1024,
  maxConcurrentStreams: 256,
  maxConnections: 1024,
  maxCallMs: 90_000,
  /** A client may not ask for a longer deadline than this (invalid_argument). */
  maxTimeoutMs: 120_000,
  /**
   * How long a server waits for a request body to arrive completely when the client's own
   * deadline is longer or absent (READ_TIMEOUT_MS may lower it, never raise it).
   */
  readTimeoutMs: 10_000,
  /** A connection with no traffic at all for this long is closed. */
  idleSessionMs: 120_000,
} as const;

const size = (n: number) => (n % (1024 * 1024) === 0 ? `${n / 1024 / 1024} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`);
const seconds = (ms: number) => `${ms / 1000} s`;

/** The table in docs/limits.md, rendered from the values above. */
export function renderLimitsTable(): string {
  const rows: [string, string, string][] = [
    ...Object.entries(REQUEST_MAX_BYTES).map(([server, bytes]): [string, string, string] => [
      `request message, ${server}`,
      size(bytes),
      "`invalid_argument` `REQUEST_TOO_LARGE`; the stream is reset",
    ]),
    [
      "request body arrival",
      `the client's deadline, at most ${seconds(LIMITS.readTimeoutMs)} (\`READ_TIMEOUT_MS\`, default and ceiling ${seconds(LIMITS.readTimeoutMs)})`,
      "`deadline_exceeded` `REQUEST_READ_TIMEOUT`; the stream is reset",
    ],
    ["response message", size(LIMITS.writeMaxBytes), "call fails"],
    ["concurrent streams per connection", String(LIMITS.maxConcurrentStreams), "HTTP/2 refuses the stream"],
    ["connections per server", String(LIMITS.maxConnections), "refused"],
    ["call duration on a server", `${seconds(LIMITS.maxCallMs)} (its own deadline when the client sets none)`, "`deadline_exceeded` `CALL_TIMEOUT`"],
    ["client-requested timeout", `at most ${seconds(LIMITS.maxTimeoutMs)}`, "`invalid_argument` `TIMEOUT_TOO_LONG`"],
    ["idle connection", seconds(LIMITS.idleSessionMs), "closed"],
    ["client calls", "every call in railfence has a deadline (rail 5 s, executor calls 10 s, CLI 10 s)", "`deadline_exceeded` / ambiguity rules"],
  ];
  return ["| limit | value | on excess |", "|---|---|---|", ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}
