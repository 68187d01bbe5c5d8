/**
 * RailProxyService handlers: validate (step 0), call the domain, map rows to messages.
 * The only layer that knows Connect codes for this service.
 */
import { Code, type ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DomainError, invalidArgument } from "../shared/errors.js";
import { dbCall } from "../shared/pg.js";
import { unavailable } from "../shared/errors.js";
import {
  RailProxyService,
  ResolutionOutcome,
  SubmissionSchema,
  SubmissionState,
  type Submission,
} from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { annotate } from "../shared/tracing.js";
import { accountLockKey, tokenSignatureValid } from "../shared/token-signature.js";
import { checkBeneficiary, checkId, checkMoney, checkPageSize, checkText, checkToken } from "../shared/validation.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { SubmissionRow, SubmissionStore } from "./submission-store.js";
import type { createAdmission } from "./admission.js";
import type { RailClient } from "./rail-client.js";

export function toSubmission(r: SubmissionRow): Submission {
  return create(SubmissionSchema, {
    payoutId: r.payout_id,
    accountId: r.account_id,
    fencingToken: BigInt(r.fencing_token),
    amount: { amountMinor: BigInt(r.amount_minor), currency: r.currency },
    beneficiary: r.beneficiary,
    state: SubmissionState[r.state],
    railReference: r.rail_reference ?? "",
    railReason: r.rail_reason ?? "",
    replicaId: r.replica_id,
    createdAt: timestampFromDate(r.created_at),
    updatedAt: timestampFromDate(r.updated_at),
    ambiguous: r.ambiguous,
    resolution: r.resolved_at
      ? {
          outcome: r.resolution_outcome === "PAID" ? ResolutionOutcome.PAID : ResolutionOutcome.NOT_PAID,
          actor: r.resolution_actor ?? "",
          note: r.resolution_note ?? "",
          resolvedAt: timestampFromDate(r.resolved_at),
          previousState: r.previous_state ? SubmissionState[r.previous_state] : SubmissionState.UNSPECIFIED,
        }
      : undefined,
  });
}

/** Reads and paging never change money, but they must still say "unavailable" clearly. */
const readPaydb = <T>(fn: () => Promise<T>) => dbCall("PAYDB", fn);

/**
 * A cursor is PostgreSQL's own `created_at::text` ("2026-01-02 03:04:05.123456+00"). Anything
 * else (Date.parse accepts "0", "June 1" or February 30) would reach the database as a
 * timestamptz it refuses, turning bad input into an internal error: check the shape and that
 * every component is a real calendar value.
 */
const CURSOR_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(\.\d{1,6})?(Z|[+-]\d{2}(:?\d{2})?)?$/;
function isCursorTimestamp(text: string): boolean {
  const m = CURSOR_TIMESTAMP.exec(text);
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const day = new Date(Date.UTC(y, mo - 1, d));
  return y >= 1 && h < 24 && mi < 60 && s < 60 && day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d;
}

/** google.protobuf.Timestamp's own valid range (0001-01-01 .. 9999-12-31, nanos < 1e9); outside it: invalid_argument. */
function checkTimestamp(field: string, ts: { seconds: bigint; nanos: number } | undefined): void {
  if (ts === undefined) return;
  if (ts.seconds < -62_135_596_800n || ts.seconds > 253_402_300_799n || ts.nanos < 0 || ts.nanos > 999_999_999) {
    throw invalidArgument(field, "TIMESTAMP_INVALID", `${field} must be a valid timestamp between 0001-01-01 and 9999-12-31`);
  }
}

const encodeCursor = (r: SubmissionRow) => Buffer.from(JSON.stringify([r.cursor, r.payout_id])).toString("base64url");
function decodeCursor(token: string): { cursor: string; payoutId: string } | undefined {
  if (!token) return undefined;
  try {
    const [cursor, payoutId] = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as [unknown, unknown];
    if (typeof cursor === "string" && typeof payoutId === "string" && isCursorTimestamp(cursor)) return { cursor, payoutId };
  } catch {
    // fall through
  }
  throw invalidArgument("page_token", "PAGE_TOKEN_INVALID", "page_token is not a token this service issued");
}

export function proxyRoutes(deps: {
  /** Shared with the lock service: only tokens it signed are admitted (optional). */
  tokenKey?: Buffer;
  rail: RailClient;
  railDeadlineMs: number;
  store: SubmissionStore;
  submit: ReturnType<typeof createAdmission>;
  metrics: ProxyMetrics;
  replicaId: string;
}) {
  const { store, submit, metrics } = deps;
  return (router: ConnectRouter) =>
    router.service(RailProxyService, {
      async submitPayout(req) {
        // Step 0: validate every field before anything is written or forwarded.
        const accountId = checkId("account_id", req.accountId);
        const payoutId = checkId("payout_id", req.payoutId);
        const token = checkToken("fencing_token", req.fencingToken);
        const amount = checkMoney("amount", req.amount);
        const beneficiary = checkBeneficiary("beneficiary", req.beneficiary);
        if (deps.tokenKey && !tokenSignatureValid(deps.tokenKey, accountLockKey(accountId), token, req.fencingTokenSignature)) {
          throw new DomainError(Code.PermissionDenied, "TOKEN_SIGNATURE_INVALID", "fencing_token was not issued by the lock service for this account", {
            field: "fencing_token_signature",
          });
        }
        annotate({ "railfence.account_id": accountId, "railfence.payout_id": payoutId, "railfence.fencing_token": token.toString() });
        const row = await submit({ accountId, payoutId, token, amountMinor: amount.amountMinor, currency: amount.currency, beneficiary, replicaId: deps.replicaId });
        return { submission: toSubmission(row) };
      },

      async getSubmission(req) {
        const payoutId = checkId("payout_id", req.payoutId);
        const row = await readPaydb(() => store.get(payoutId));
        if (!row) throw new DomainError(Code.NotFound, "SUBMISSION_NOT_FOUND", "no submission for this payout", { payout_id: payoutId });
        return { submission: toSubmission(row) };
      },

      async listUnresolved(req) {
        const limit = checkPageSize("page_size", req.pageSize, 100, 500);
        const after = decodeCursor(req.pageToken);
        const rows = await readPaydb(() => store.listUnresolved(limit + 1, after));
        const page = rows.slice(0, limit);
        return {
          submissions: page.map(toSubmission),
          nextPageToken: rows.length > limit ? encodeCursor(page[page.length - 1]!) : "",
        };
      },

      async resolveSubmission(req) {
        const payoutId = checkId("payout_id", req.payoutId);
        if (req.outcome !== ResolutionOutcome.PAID && req.outcome !== ResolutionOutcome.NOT_PAID) {
          throw invalidArgument("outcome", "FIELD_INVALID", "outcome must be PAID or NOT_PAID");
        }
        const actor = checkText("actor", req.actor, 1, 128);
        const note = checkText("note", req.note, 0, 1000);
        const outcome = req.outcome === ResolutionOutcome.PAID ? "PAID" : "NOT_PAID";
        const row = await readPaydb(() => store.resolve(payoutId, outcome, actor, note));
        if (row) {
          metrics.resolved.inc({ outcome });
          return { submission: toSubmission(row) };
        }
        const existing = await readPaydb(() => store.get(payoutId));
        if (!existing) throw new DomainError(Code.NotFound, "SUBMISSION_NOT_FOUND", "no submission for this payout", { payout_id: payoutId });
        throw new DomainError(Code.FailedPrecondition, "NOT_AMBIGUOUS", `submission is ${existing.state}, not ambiguous; only ambiguous submissions can be resolved`, {
          payout_id: payoutId,
          state: existing.state,
        });
      },

      async getRailStatement(req) {
        const pageSize = checkPageSize("page_size", req.pageSize, 500, 1000);
        checkTimestamp("since", req.since);
        try {
          const page = await deps.rail.listPayments({ since: req.since, afterSequence: req.afterSequence, pageSize }, { timeoutMs: deps.railDeadlineMs });
          return { payments: page.payments, hasMore: page.hasMore, coveredUntil: page.coveredUntil };
        } catch (err) {
          throw unavailable("RAIL_UNAVAILABLE", "the rail's statement could not be read", 2000, err);
        }
      },
    });
}
