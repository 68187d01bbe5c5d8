/**
 * The rail-proxy calls operators and executors use.
 *
 * Reads (GetSubmission, ListPayoutSubmissions, ListUnresolved, GetRailStatement) change nothing: they are retried on
 * transient failures, each retry on the next replica.
 *
 * SubmitPayout has NO duplicate protection (the rail is not idempotent): it is sent exactly
 * once, to one replica, and never retried by this library. When its outcome is unknown — the
 * answer was lost, the call timed out, or the proxy answered RAIL_AMBIGUOUS — it throws
 * OutcomeUnknownError whose checkStatus() reads the intent ledger (GetSubmission) instead.
 */
import { type ConnectError, createClient } from "@connectrpc/connect";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { runAttempts, type CallOptions } from "./attempts.js";
import { OutcomeUnknownError, RailfenceError } from "./errors.js";
import {
  RailProxyService,
  type GetRailStatementResponse,
  type ListUnresolvedResponse,
  type Submission,
  type SubmitPayoutRequest,
} from "./gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { classifyOutcome } from "./outcome.js";
import type { RetryPolicy } from "./retry.js";
import type { Transports } from "./transport.js";

export interface RailProxySettings {
  urls: readonly string[];
  transports: Transports;
  policy: RetryPolicy;
  deadlineMs: number;
  timeoutMs: number;
}

export type SubmitPayoutInit = Omit<Partial<SubmitPayoutRequest>, "$typeName" | "amount"> & {
  accountId: string;
  payoutId: string;
  fencingToken: bigint;
  amount: { amountMinor: bigint; currency: string };
  beneficiary: string;
};

export class RailProxyClient {
  private next = 0;

  constructor(private readonly s: RailProxySettings) {}

  /** The intent-ledger row of a payout (NOT_FOUND: never admitted, nothing was sent to the rail). */
  async getSubmission(payoutId: string, opts: CallOptions = {}): Promise<Submission> {
    return (await this.read(opts, (c, o) => c.getSubmission({ payoutId }, o))).submission!;
  }

  /**
   * Every submission of one payout, whatever reference it was submitted under (an executor in
   * attempt-reference mode settles the payout from these, not from one reference).
   */
  async listPayoutSubmissions(payoutId: string, opts: CallOptions = {}): Promise<Submission[]> {
    return (await this.read(opts, (c, o) => c.listPayoutSubmissions({ payoutId }, o))).submissions;
  }

  /** Ambiguous submissions waiting for the reconciler or a human, oldest first. */
  async listUnresolved(page: { pageSize?: number; pageToken?: string } = {}, opts: CallOptions = {}): Promise<ListUnresolvedResponse> {
    return this.read(opts, (c, o) => c.listUnresolved({ pageSize: page.pageSize ?? 0, pageToken: page.pageToken ?? "" }, o));
  }

  /** One page of the rail's statement, read through the proxy. */
  async getRailStatement(q: { since?: Timestamp; afterSequence?: bigint; pageSize?: number } = {}, opts: CallOptions = {}): Promise<GetRailStatementResponse> {
    return this.read(opts, (c, o) =>
      c.getRailStatement({ ...(q.since ? { since: q.since } : {}), afterSequence: q.afterSequence ?? 0n, pageSize: q.pageSize ?? 0 }, o),
    );
  }

  /**
   * Submits once. A definite refusal throws RailfenceError (nothing was forwarded, or the rail
   * rejected it); an unknown outcome throws OutcomeUnknownError — never retry, check its status.
   */
  async submitPayout(req: SubmitPayoutInit, opts: CallOptions = {}): Promise<Submission> {
    const { s } = this;
    const check = () => this.getSubmission(req.payoutId);
    try {
      const run = await runAttempts(
        {
          policy: s.policy,
          endpoints: s.urls,
          idempotent: false,
          deadlineMs: opts.deadlineMs ?? s.deadlineMs,
          timeoutMs: opts.timeoutMs ?? s.timeoutMs,
          signal: opts.signal,
          startAt: this.next++,
        },
        (a) =>
          createClient(RailProxyService, s.transports.get(a.endpoint)).submitPayout(req, { timeoutMs: a.timeoutMs, ...(a.signal ? { signal: a.signal } : {}) }),
      );
      return run.value.submission!;
    } catch (err) {
      if (!(err instanceof RailfenceError)) throw err;
      if (outcomeUnknown(err.connectError)) {
        const unknown = new OutcomeUnknownError<Submission>(err.connectError, check);
        unknown.endpoint = err.endpoint;
        throw unknown;
      }
      throw err;
    }
  }

  private async read<T>(
    opts: CallOptions,
    fn: (c: ReturnType<typeof createClient<typeof RailProxyService>>, o: { timeoutMs: number; signal?: AbortSignal }) => Promise<T>,
  ): Promise<T> {
    const { s } = this;
    const run = await runAttempts(
      {
        policy: s.policy,
        endpoints: s.urls,
        idempotent: true,
        deadlineMs: opts.deadlineMs ?? s.deadlineMs,
        timeoutMs: opts.timeoutMs ?? s.timeoutMs,
        signal: opts.signal,
        startAt: this.next++,
      },
      (a) => fn(createClient(RailProxyService, s.transports.get(a.endpoint)), { timeoutMs: a.timeoutMs, ...(a.signal ? { signal: a.signal } : {}) }),
    );
    return run.value;
  }
}

/**
 * Did the submission possibly take effect without us learning how? The library's one
 * classification (outcome.ts) says so: a transport failure once connected, a deadline, or the
 * proxy saying the rail's answer was lost (RAIL_AMBIGUOUS). A refusal with ErrorInfo (FENCED_OUT,
 * PAYDB_UNAVAILABLE, DUPLICATE_SUBMISSION, ...), a connection never made and a TLS configuration
 * failure are definite: nothing was forwarded.
 */
export function outcomeUnknown(err: ConnectError): boolean {
  return classifyOutcome(err) === "unknown";
}
