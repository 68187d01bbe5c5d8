/**
 * The entry point: `createRailfenceClient(options)` wires transports, the retry policy (one
 * retry budget per client), the intent key store and the two API surfaces.
 */
import type { Transport } from "@connectrpc/connect";
import { MemoryKeyStore, type IntentKeyStore } from "./key-store.js";
import { PayoutsClient } from "./payouts.js";
import { RailProxyClient } from "./rail-proxy.js";
import { retryPolicy, type RetryOptions } from "./retry.js";
import { Transports, type TransportOptions } from "./transport.js";

export interface RailfenceClientOptions extends TransportOptions {
  /** The payouts API, e.g. https://payouts.railfence.svc:7400. */
  payoutsUrl?: string;
  /** rail-proxy replicas (operators, executors); reads rotate over them. */
  railProxyUrls?: readonly string[];
  /** Overall deadline of one operation, retries included (default 30 s). */
  deadlineMs?: number;
  /** Deadline of one attempt (default 10 s). */
  timeoutMs?: number;
  retry?: RetryOptions;
  /**
   * Where intent keys live, by intent id (default: a MemoryKeyStore of this client: keys survive
   * retries and repeated calls, not a restart; a service passes a durable store, README).
   */
  keyStore?: IntentKeyStore;
  /**
   * How long a key is assumed to be remembered by the server from its creation, until an answer
   * says when it expires (`idempotency-key-expires-at`). Default 23 h: the server keeps keys at
   * least 24 h after success. Past it a key is never sent; its payout is looked up instead.
   */
  keyRetentionMs?: number;
  /** Randomness for backoff jitter (tests pass a seeded one). */
  random?: () => number;
}

export interface RailfenceClient {
  payouts: PayoutsClient;
  railProxy: RailProxyClient;
  /**
   * The configured transport (TLS, tracing) for an endpoint, for calls this library does not
   * wrap. Calls made on it get NO retries: follow the rules for clients yourself.
   */
  transport(baseUrl: string): Transport;
  /** Closes every HTTP/2 session. */
  close(): void;
}

export function createRailfenceClient(o: RailfenceClientOptions): RailfenceClient {
  const transports = new Transports(o);
  const policy = retryPolicy(o.retry, o.random);
  const deadlineMs = o.deadlineMs ?? 30_000;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const missing = (what: string) => {
    throw new Error(`${what} is not configured (createRailfenceClient({ ${what}: ... }))`);
  };
  const payouts = new PayoutsClient({
    get url() {
      return o.payoutsUrl ?? missing("payoutsUrl");
    },
    transports,
    policy,
    // One default store per client: an intent id keeps its key (and its body) across calls.
    keyStore: o.keyStore ?? new MemoryKeyStore(),
    deadlineMs,
    timeoutMs,
    keyRetentionMs: o.keyRetentionMs ?? 23 * 3_600_000,
    announced: {},
  });
  const railProxy = new RailProxyClient({ urls: o.railProxyUrls ?? [], transports, policy, deadlineMs, timeoutMs });
  return { payouts, railProxy, transport: (url) => transports.get(url), close: () => transports.close() };
}
