/**
 * Load from the node through the payouts Service (its ClusterIP, routed by kube-proxy like any
 * in-cluster client): CreatePayout with one Idempotency-Key per intended payout, retried with the
 * SAME key on any transient failure, exactly as the API contract tells clients to. Every intent
 * is remembered, so that "no submission lost" is checked per intent afterwards.
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { PayoutService, PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { clientNodeOptions, type ClientTlsFiles } from "./client-tls.js";
import { sleep } from "./kube.js";

export interface Intent {
  key: string;
  clientReference: string;
  accountId: string;
  payoutId?: string;
  /** When the call that created the payout returned (ms since the epoch). */
  createdAt?: number;
  attempts: number;
  errors: string[];
}

const PERMANENT = new Set([Code.InvalidArgument, Code.PermissionDenied, Code.Unauthenticated, Code.Unimplemented, Code.FailedPrecondition]);

/** A gRPC client of the payouts Service; with tls, an https:// URL and the client's certificate. */
export function payoutsClient(baseUrl: string, tls?: ClientTlsFiles) {
  return createClient(PayoutService, createGrpcTransport({ baseUrl, defaultTimeoutMs: 10_000, ...(tls ? { nodeOptions: clientNodeOptions(tls) } : {}) }));
}

export class HostLoad {
  readonly intents: Intent[] = [];
  private stopping = false;
  private workers: Promise<void>[] = [];
  private readonly client;

  constructor(
    baseUrl: string,
    private readonly runId: string,
    private readonly opts: { concurrency: number; accounts: number; pauseMs: number },
    tls?: ClientTlsFiles,
  ) {
    this.client = payoutsClient(baseUrl, tls);
  }

  start(): this {
    this.workers = Array.from({ length: this.opts.concurrency }, () => this.worker());
    return this;
  }

  /** Stops creating new intents; resolves when every started intent has its payout (or gave up). */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers);
  }

  private async worker(): Promise<void> {
    while (!this.stopping) {
      const n = this.intents.length;
      const intent: Intent = {
        key: randomUUID(),
        clientReference: `${this.runId}-${n}`,
        accountId: `${this.runId}-acct-${n % this.opts.accounts}`,
        attempts: 0,
        errors: [],
      };
      this.intents.push(intent);
      await this.submit(intent);
      await sleep(this.opts.pauseMs);
    }
  }

  /** One intent, retried with its own key until it has a payout (bounded: 60 attempts). */
  private async submit(intent: Intent): Promise<void> {
    for (;;) {
      intent.attempts++;
      try {
        const r = await this.client.createPayout(
          {
            accountId: intent.accountId,
            amount: { amountMinor: 100n, currency: "EUR" },
            beneficiary: `ben-${intent.clientReference}`,
            clientReference: intent.clientReference,
          },
          { headers: { "idempotency-key": intent.key } },
        );
        intent.payoutId = r.payout!.payoutId;
        intent.createdAt = Date.now();
        return;
      } catch (err) {
        const ce = ConnectError.from(err);
        intent.errors.push(`${Code[ce.code]}: ${new Date().toISOString().slice(11, 23)} ${ce.rawMessage.slice(0, 120)}`);
        if (PERMANENT.has(ce.code) || intent.attempts >= 60) return;
        await sleep(Math.min(1000, 50 * 2 ** Math.min(intent.attempts, 5)));
      }
    }
  }
}

/** Polls GetPayout until every payout is settled from the executors' side (PAID, FAILED or UNKNOWN). */
export async function waitSettled(baseUrl: string, payoutIds: string[], timeoutMs: number, tls?: ClientTlsFiles): Promise<Map<string, PayoutState>> {
  const client = payoutsClient(baseUrl, tls);
  const states = new Map<string, PayoutState>();
  const settled = (s: PayoutState | undefined) => s === PayoutState.PAID || s === PayoutState.FAILED || s === PayoutState.UNKNOWN;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const id of payoutIds) {
      if (settled(states.get(id))) continue;
      try {
        const r = await client.getPayout({ payoutId: id });
        states.set(id, r.payout!.state);
      } catch {
        // A pod rolling away: ask again on the next round.
      }
    }
    if (payoutIds.every((id) => settled(states.get(id))) || Date.now() > deadline) return states;
    await sleep(1000);
  }
}

/**
 * Load across a switch from cleartext to mutual TLS, as a client that moves with the server: each
 * attempt goes over the transport that last worked; a failed attempt flips to the other one and
 * retries with the SAME Idempotency-Key. Its certificate carries the identity the cleartext server
 * gave every caller (payouts.defaultClientId), so a retry across the switch stays in the key's
 * scope (docs/deploy.md "From cleartext").
 */
export class SwitchingLoad {
  readonly intents: Array<Intent & { modes: string[] }> = [];
  private stopping = false;
  private workers: Promise<void>[] = [];
  private readonly clients: Partial<Record<"cleartext" | "tls", ReturnType<typeof payoutsClient>>>;
  private mode: "cleartext" | "tls" = "cleartext";

  constructor(
    cleartextUrl: string,
    private readonly tlsUrl: string,
    private readonly runId: string,
    private readonly opts: { concurrency: number; accounts: number; pauseMs: number },
  ) {
    this.clients = { cleartext: payoutsClient(cleartextUrl) };
  }

  /** The client's certificate, once the upgrade has made the CA that issues it. */
  enableTls(tls: ClientTlsFiles): void {
    this.clients.tls = payoutsClient(this.tlsUrl, tls);
  }

  get tlsEnabled(): boolean {
    return this.clients.tls !== undefined;
  }

  start(): this {
    this.workers = Array.from({ length: this.opts.concurrency }, () => this.worker());
    return this;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers);
  }

  private async worker(): Promise<void> {
    while (!this.stopping) {
      const n = this.intents.length;
      const intent = {
        key: randomUUID(),
        clientReference: `${this.runId}-${n}`,
        accountId: `${this.runId}-acct-${n % this.opts.accounts}`,
        attempts: 0,
        errors: [] as string[],
        modes: [] as string[],
      };
      this.intents.push(intent);
      for (;;) {
        intent.attempts++;
        const mode = this.mode;
        intent.modes.push(mode);
        try {
          const r = await this.clients[mode]!.createPayout(
            {
              accountId: intent.accountId,
              amount: { amountMinor: 100n, currency: "EUR" },
              beneficiary: `ben-${intent.clientReference}`,
              clientReference: intent.clientReference,
            },
            { headers: { "idempotency-key": intent.key } },
          );
          Object.assign(intent, { payoutId: r.payout!.payoutId, createdAt: Date.now() });
          break;
        } catch (err) {
          const ce = ConnectError.from(err);
          intent.errors.push(`${mode} ${Code[ce.code]}: ${new Date().toISOString().slice(11, 23)} ${ce.rawMessage.slice(0, 100)}`);
          if (intent.attempts >= 80) break;
          // Whatever failed, the other transport may be the one the pod now speaks.
          if (this.mode === mode) this.mode = mode === "cleartext" && this.clients.tls ? "tls" : "cleartext";
          await sleep(Math.min(1000, 50 * 2 ** Math.min(intent.attempts, 5)));
        }
      }
      await sleep(this.opts.pauseMs);
    }
  }
}
