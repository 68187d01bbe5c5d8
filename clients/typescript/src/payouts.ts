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
import { PayoutService, PayoutState, type ListPayoutsResponse, type Payout } from "./gen/railfence/payouts/v1/payouts_pb.js";
import type { IntentKeyStore } from "./key-store.js";
import type { RetryPolicy } from "./retry.js";
import type { Transports } from "./transport.js";

/** Header (gRPC metadata) names of the Idempotency-Key contract. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const REPLAYED_HEADER = "idempotency-replayed";

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
  /** The server keeps answers this long; an older persisted intent is refused (default 24 h less a margin). */
  keyRetentionMs: number;
}

/** sha256 of the request's fields: the body the key is bound to. */
export function requestFingerprint(r: PayoutRequest): string {
  const canonical = JSON.stringify([r.accountId, r.amount.amountMinor.toString(), r.amount.currency, r.beneficiary, r.clientReference ?? ""]);
  return createHash("sha256").update(canonical).digest("hex");
}

/** One payment intent: one key, reused for every attempt of this exact request. */
export class PayoutIntent {
  readonly request: Readonly<PayoutRequest>;

  constructor(
    private readonly s: PayoutsSettings,
    request: PayoutRequest,
    /** The Idempotency-Key, minted once. */
    readonly key: string,
    readonly id: string | undefined,
  ) {
    // A copy, frozen: mutating the caller's object cannot change what this key is bound to.
    this.request = Object.freeze({
      accountId: request.accountId,
      amount: Object.freeze({ amountMinor: request.amount.amountMinor, currency: request.amount.currency }),
      beneficiary: request.beneficiary,
      clientReference: request.clientReference ?? "",
    });
  }

  /**
   * Sends the intent until it has a definite answer: the created (or replayed) payout, or a
   * final refusal. Transient failures are retried with the same key within the deadline and the
   * retry budget; after giving up, calling submit() again later is safe (same key).
   */
  async submit(opts: CallOptions = {}): Promise<CreatePayoutResult> {
    const { s } = this;
    try {
      let replayed = false;
      const run = await runAttempts(
        {
          policy: s.policy,
          endpoints: [s.url],
          idempotent: true,
          deadlineMs: opts.deadlineMs ?? s.deadlineMs,
          timeoutMs: opts.timeoutMs ?? s.timeoutMs,
          signal: opts.signal,
        },
        async (a) => {
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
              },
            },
          );
          if (!res.payout) throw new ConnectError("CreatePayout answered without a payout", Code.Internal);
          return res.payout;
        },
      );
      return { payout: run.value, replayed, idempotencyKey: this.key, attempts: run.attempts };
    } catch (err) {
      if (err instanceof RailfenceError) err.idempotencyKey = this.key;
      throw err;
    }
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
   * is resumed with its key; a different request under the same id is refused
   * (IntentMismatchError), and one older than the server's retention too (IntentExpiredError).
   */
  async intent(request: PayoutRequest, opts: IntentOptions = {}): Promise<PayoutIntent> {
    const fingerprint = requestFingerprint(request);
    const store = this.s.keyStore;
    if (opts.id === undefined) return new PayoutIntent(this.s, request, opts.key ?? randomUUID(), opts.id);
    const minted = { key: opts.key ?? randomUUID(), fingerprint, createdAt: Date.now() };
    const stored = await store.putIfAbsent(opts.id, minted);
    if (stored.fingerprint !== fingerprint) throw new IntentMismatchError(opts.id);
    if (opts.key !== undefined && stored.key !== opts.key) throw new IntentMismatchError(opts.id);
    if (Date.now() - stored.createdAt > this.s.keyRetentionMs) throw new IntentExpiredError(opts.id, new Date(stored.createdAt));
    return new PayoutIntent(this.s, request, stored.key, opts.id);
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

  private async read<T>(
    opts: CallOptions,
    fn: (client: ReturnType<typeof createClient<typeof PayoutService>>, o: { timeoutMs: number; signal?: AbortSignal }) => Promise<T>,
  ): Promise<T> {
    const { s } = this;
    const run = await runAttempts(
      {
        policy: s.policy,
        endpoints: [s.url],
        idempotent: true,
        deadlineMs: opts.deadlineMs ?? s.deadlineMs,
        timeoutMs: opts.timeoutMs ?? s.timeoutMs,
        signal: opts.signal,
      },
      (a) => fn(createClient(PayoutService, s.transports.get(a.endpoint)), { timeoutMs: a.timeoutMs, ...(a.signal ? { signal: a.signal } : {}) }),
    );
    return run.value;
  }
}
