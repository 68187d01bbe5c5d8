/**
 * The payouts API with RESILIENCE.md's rules for clients built in.
 *
 * `intent(request)` mints ONE Idempotency-Key for one payment intent; `submit()` sends it with
 * that key on every attempt and every later call, so a lost answer, a restart of the payouts
 * service or an outage of its store can never create the payout twice. The request is frozen
 * into the intent: a changed request is a new intent with a new key. With an intent id the key
 * is kept in the client's key store (memory by default; a durable one survives a restart of
 * the calling process).
 */
import { createHash, randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { runAttempts, type CallOptions } from "./attempts.js";
import { IntentExpiredError, IntentMismatchError, RailfenceError } from "./errors.js";
import { isReason, REASONS } from "./reasons.js";
import { PayoutService, PayoutState, type ListPayoutsResponse, type Payout } from "./gen/railfence/payouts/v1/payouts_pb.js";
import type { IntentKeyStore } from "./key-store.js";
import type { RetryPolicy } from "./retry.js";
import type { Transports } from "./transport.js";

/** Header (gRPC metadata) names of the Idempotency-Key contract. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const REPLAYED_HEADER = "idempotency-replayed";
/** When the server forgets the key (RFC 3339 UTC), on every CreatePayout answer tied to a stored key. */
export const EXPIRES_AT_HEADER = "idempotency-key-expires-at";
/** How long the server keeps keys, in whole seconds, on every CreatePayout answer that stored one. */
export const RETENTION_HEADER = "railfence-idempotency-retention-seconds";

/**
 * How long before the server's stated expiry a key stops being sent: clocks differ and a request
 * takes time to arrive. At most a minute, at most half the key's known lifetime (a test server
 * keeping keys for seconds still gets its keys used).
 */
const EXPIRY_MARGIN_MS = 60_000;

/** What to pay. Amounts are integer minor units (1050 with EUR is 10.50 EUR). */
export interface PayoutRequest {
  accountId: string;
  amount: { amountMinor: bigint; currency: string };
  beneficiary: string;
  clientReference?: string;
}

export interface CreatePayoutResult {
  payout: Payout;
  /** The server answered from its store (`idempotency-replayed: true`): an earlier attempt created it. */
  replayed: boolean;
  idempotencyKey: string;
  attempts: number;
  /** When the server forgets the key (`idempotency-key-expires-at`); undefined when it did not say. */
  keyExpiresAt: Date | undefined;
  /**
   * The key was past the server's retention, so it was not sent: the payout was found with
   * LookupPayout by the key instead (replayed is true too: an earlier attempt created it).
   */
  lookedUp: boolean;
}

export interface IntentOptions {
  /**
   * A stable id of this intent (an order or invoice id): the key is saved under it in the key
   * store before the first attempt (by default this client's memory; with a durable store a
   * restarted process gets the same key back), bound to this request's body.
   */
  id?: string;
  /** Use this key instead of minting one (e.g. a key an operator wrote down). */
  key?: string;
}

export interface PayoutsSettings {
  url: string;
  transports: Transports;
  policy: RetryPolicy;
  keyStore: IntentKeyStore;
  deadlineMs: number;
  timeoutMs: number;
  /**
   * How long a key is assumed to be remembered from its creation while the server has not said
   * (its `idempotency-key-expires-at` header replaces this once it answers); default 23 h.
   */
  keyRetentionMs: number;
  /**
   * The retention the server last announced (`railfence-idempotency-retention-seconds`), shared
   * by every intent of this client: a key whose own expiry was never learned (no answer came
   * back) is not sent once it is older than this, even if keyRetentionMs is longer (decision 051).
   */
  announced: { retentionMs?: number };
}

/** sha256 of the request's fields: the body the key is bound to. */
export function requestFingerprint(r: PayoutRequest): string {
  const canonical = JSON.stringify([r.accountId, r.amount.amountMinor.toString(), r.amount.currency, r.beneficiary, r.clientReference ?? ""]);
  return createHash("sha256").update(canonical).digest("hex");
}

/** One payment intent: one key, reused for every attempt of this exact request. */
export class PayoutIntent {
  readonly request: Readonly<PayoutRequest>;
  /** When the server forgets the key (ms since the epoch), once an answer said so. */
  private expiresAt: number | undefined;

  constructor(
    private readonly s: PayoutsSettings,
    request: PayoutRequest,
    /** The Idempotency-Key, minted once. */
    readonly key: string,
    readonly id: string | undefined,
    /** When the key was minted (ms since the epoch; from the key store for a resumed intent). */
    readonly createdAt: number = Date.now(),
    expiresAt?: number,
  ) {
    this.expiresAt = expiresAt;
    // A copy, frozen: mutating the caller's object cannot change what this key is bound to.
    this.request = Object.freeze({
      accountId: request.accountId,
      amount: Object.freeze({ amountMinor: request.amount.amountMinor, currency: request.amount.currency }),
      beneficiary: request.beneficiary,
      clientReference: request.clientReference ?? "",
    });
  }

  /**
   * The moment from which this key is no longer sent: the server's stated expiry less a margin,
   * or, while the server has not said, `keyRetentionMs` (or the shorter retention the server
   * last announced) after the key was minted: the key was minted before the server first saw
   * it, so the server remembers it at least that long.
   */
  get usableUntil(): Date {
    if (this.expiresAt === undefined)
      return new Date(this.createdAt + Math.min(this.s.keyRetentionMs, this.s.announced.retentionMs ?? Number.POSITIVE_INFINITY));
    const margin = Math.min(EXPIRY_MARGIN_MS, Math.max(0, (this.expiresAt - this.createdAt) / 2));
    return new Date(this.expiresAt - margin);
  }

  /**
   * Sends the intent until it has a definite answer: the created (or replayed) payout, or a
   * final refusal. Transient failures and unknown outcomes are retried with the same key within
   * the deadline and the retry budget; after giving up, calling submit() again later is safe
   * (same key). A key past the server's retention is never sent: the payout is looked up by it
   * instead (LookupPayout), and when there is none, IntentExpiredError says nothing was paid.
   */
  async submit(opts: CallOptions = {}): Promise<CreatePayoutResult> {
    const { s } = this;
    if (Date.now() >= this.usableUntil.getTime()) return this.lookUp(opts);
    try {
      let replayed = false;
      let expiresAt: number | undefined;
      const run = await runAttempts(attemptPlan(s, opts), async (a) => {
        replayed = false;
        const client = createClient(PayoutService, s.transports.get(a.endpoint));
        const res = await client.createPayout(
          { ...this.request, amount: { ...this.request.amount } },
          {
            headers: { [IDEMPOTENCY_KEY_HEADER]: this.key },
            timeoutMs: a.timeoutMs,
            signal: a.signal,
            onHeader: (h) => {
              replayed = h.get(REPLAYED_HEADER) === "true";
              const at = Date.parse(h.get(EXPIRES_AT_HEADER) ?? "");
              if (Number.isFinite(at)) expiresAt = at;
              const seconds = h.get(RETENTION_HEADER);
              if (seconds !== null && /^\d{1,10}$/.test(seconds)) s.announced.retentionMs = Number(seconds) * 1000;
            },
          },
        );
        if (!res.payout) throw new ConnectError("CreatePayout answered without a payout", Code.Internal);
        return res.payout;
      });
      if (expiresAt !== undefined) await this.learnExpiry(expiresAt);
      return {
        payout: run.value,
        replayed,
        idempotencyKey: this.key,
        attempts: run.attempts,
        keyExpiresAt: expiresAt === undefined ? undefined : new Date(expiresAt),
        lookedUp: false,
      };
    } catch (err) {
      if (err instanceof RailfenceError) err.idempotencyKey = this.key;
      throw err;
    }
  }

  /** Remembers the server's expiry of the key, in the key store too (a resumed intent uses it). */
  private async learnExpiry(expiresAt: number): Promise<void> {
    this.expiresAt = expiresAt;
    // The payout exists whatever happens here: a store that cannot record the expiry must not
    // turn a success into an error (a restarted process then assumes keyRetentionMs instead).
    if (this.id !== undefined) await this.s.keyStore.recordExpiry?.(this.id, this.key, expiresAt)?.catch(() => {});
  }

  /** The key is past the server's memory: find what it created instead of sending it. */
  private async lookUp(opts: CallOptions): Promise<CreatePayoutResult> {
    let found: { payout: Payout; attempts: number };
    try {
      found = await readPayouts(this.s, opts, (client, o) => client.lookupPayout({ by: { case: "idempotencyKey", value: this.key } }, o));
    } catch (err) {
      if (err instanceof RailfenceError && isReason(err, REASONS.PAYOUT_NOT_FOUND)) {
        throw new IntentExpiredError(this.id ?? this.key, new Date(this.createdAt), this.key, this.usableUntil);
      }
      if (err instanceof RailfenceError) err.idempotencyKey = this.key;
      throw err;
    }
    const expiresAt = this.expiresAt;
    return {
      payout: found.payout,
      replayed: true,
      idempotencyKey: this.key,
      attempts: found.attempts,
      keyExpiresAt: expiresAt === undefined ? undefined : new Date(expiresAt),
      lookedUp: true,
    };
  }

  /** Forgets a persisted key (after the caller has recorded the outcome). */
  async forget(): Promise<void> {
    if (this.id !== undefined) await this.s.keyStore.delete(this.id);
  }
}

export class PayoutsClient {
  constructor(private readonly s: PayoutsSettings) {}

  /**
   * A new intent for request. With `id`, an intent saved earlier under that id in the key store
   * is resumed with its key (and what the server said about its expiry); a different request
   * under the same id is refused (IntentMismatchError). A resumed key past the server's retention
   * is not sent again: submit() looks its payout up instead.
   */
  async intent(request: PayoutRequest, opts: IntentOptions = {}): Promise<PayoutIntent> {
    const fingerprint = requestFingerprint(request);
    const store = this.s.keyStore;
    if (opts.id === undefined) return new PayoutIntent(this.s, request, opts.key ?? randomUUID(), opts.id);
    const minted = { key: opts.key ?? randomUUID(), fingerprint, createdAt: Date.now() };
    const stored = await store.putIfAbsent(opts.id, minted);
    if (stored.fingerprint !== fingerprint) throw new IntentMismatchError(opts.id);
    if (opts.key !== undefined && stored.key !== opts.key) throw new IntentMismatchError(opts.id);
    return new PayoutIntent(this.s, request, stored.key, opts.id, stored.createdAt, stored.expiresAt);
  }

  /** Creates a payout in one call: a fresh intent, submitted. */
  async create(request: PayoutRequest, opts: IntentOptions & CallOptions = {}): Promise<CreatePayoutResult> {
    return (await this.intent(request, opts)).submit(opts);
  }

  /** Reads one payout (retried on transient failures: reads change nothing). */
  async get(payoutId: string, opts: CallOptions = {}): Promise<Payout> {
    const run = await this.read(opts, (client, o) => client.getPayout({ payoutId }, o));
    return run.payout!;
  }

  /** One page of the caller's payouts, newest first. */
  async list(
    filter: { accountId?: string; state?: PayoutState; pageSize?: number; pageToken?: string } = {},
    opts: CallOptions = {},
  ): Promise<ListPayoutsResponse> {
    return this.read(opts, (client, o) =>
      client.listPayouts(
        {
          accountId: filter.accountId ?? "",
          state: filter.state ?? PayoutState.UNSPECIFIED,
          pageSize: filter.pageSize ?? 0,
          pageToken: filter.pageToken ?? "",
        },
        o,
      ),
    );
  }

  /**
   * Finds one of the caller's payouts by the Idempotency-Key that created it or by its client
   * reference (LookupPayout; works after the key's retention ended). NOT_FOUND (PAYOUT_NOT_FOUND):
   * no such payout of this caller.
   */
  async lookup(by: { idempotencyKey: string } | { clientReference: string }, opts: CallOptions = {}): Promise<Payout> {
    const req =
      "idempotencyKey" in by ? { case: "idempotencyKey" as const, value: by.idempotencyKey } : { case: "clientReference" as const, value: by.clientReference };
    return (await readPayouts(this.s, opts, (client, o) => client.lookupPayout({ by: req }, o))).payout;
  }

  private async read<T>(
    opts: CallOptions,
    fn: (client: ReturnType<typeof createClient<typeof PayoutService>>, o: { timeoutMs: number; signal?: AbortSignal }) => Promise<T>,
  ): Promise<T> {
    const { s } = this;
    const run = await runAttempts(attemptPlan(s, opts), (a) =>
      fn(createClient(PayoutService, s.transports.get(a.endpoint)), { timeoutMs: a.timeoutMs, ...(a.signal ? { signal: a.signal } : {}) }),
    );
    return run.value;
  }
}

/** How every call of this client is attempted: its policy, its one endpoint, the caller's bounds. */
function attemptPlan(s: PayoutsSettings, opts: CallOptions) {
  return {
    policy: s.policy,
    endpoints: [s.url],
    idempotent: true,
    deadlineMs: opts.deadlineMs ?? s.deadlineMs,
    timeoutMs: opts.timeoutMs ?? s.timeoutMs,
    signal: opts.signal,
  };
}

/** A read that answers a payout (retried like every read), with the attempts it took. */
async function readPayouts(
  s: PayoutsSettings,
  opts: CallOptions,
  fn: (client: ReturnType<typeof createClient<typeof PayoutService>>, o: { timeoutMs: number; signal?: AbortSignal }) => Promise<{ payout?: Payout }>,
): Promise<{ payout: Payout; attempts: number }> {
  const run = await runAttempts(attemptPlan(s, opts), async (a) => {
    const res = await fn(createClient(PayoutService, s.transports.get(a.endpoint)), { timeoutMs: a.timeoutMs, ...(a.signal ? { signal: a.signal } : {}) });
    if (!res.payout) throw new ConnectError("the answer carried no payout", Code.Internal);
    return res.payout;
  });
  return { payout: run.value, attempts: run.attempts };
}
