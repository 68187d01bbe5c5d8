/**
 * RailProxyService handlers: validate (step 0), call the domain, map rows to messages.
 * The only layer that knows Connect codes for this service.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DomainError, invalidArgument, REASONS, unavailable } from "../shared/domain/errors.js";
import { dbCall, dbUnavailable } from "../shared/db/pg.js";
import type { Logger } from "../shared/process/logger.js";
import { parseSubmissionRef } from "../shared/domain/submission-ref.js";
import { RailProxyService, ResolutionOutcome, SubmissionSchema, SubmissionState, type Submission } from "../shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { decodePageToken, encodePageToken, isTimestampText } from "../shared/domain/page-token.js";
import { annotate } from "../shared/observability/tracing.js";
import { accountLockKey, tokenSignatureValid } from "../shared/process/token-signature.js";
import { checkBeneficiary, checkId, checkMoney, checkPageSize, checkText, checkToken } from "../shared/domain/validation.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { Intent, SubmissionRow, SubmissionStore } from "./submission-store.js";
import type { Refusal, Submit, SubmitOutcome } from "./admission.js";
import type { RailClient } from "./rail-client.js";
import { int8 } from "../shared/domain/int8.js";

export function toSubmission(r: SubmissionRow): Submission {
  return create(SubmissionSchema, {
    payoutId: r.payout_id,
    accountId: r.account_id,
    fencingToken: int8(r.fencing_token),
    amount: { amountMinor: int8(r.amount_minor), currency: r.currency },
    beneficiary: r.beneficiary,
    state: SubmissionState[r.state],
    railReference: r.rail_reference ?? "",
    railReason: r.rail_reason ?? "",
    replicaId: r.replica_id,
    createdAt: timestampFromDate(r.created_at),
    updatedAt: timestampFromDate(r.updated_at),
    ambiguous: r.ambiguous,
    boundPayoutId: r.bound_payout_id,
    lateAnswer: r.late_answered_at
      ? {
          state: r.late_answer_state === "ACCEPTED" ? SubmissionState.ACCEPTED : SubmissionState.REJECTED,
          railReference: r.late_rail_reference ?? "",
          railReason: r.late_rail_reason ?? "",
          answeredAt: timestampFromDate(r.late_answered_at),
        }
      : undefined,
    contradiction: r.contradicted_at
      ? { railReference: r.contradicting_rail_reference ?? "", actor: r.contradiction_actor ?? "", recordedAt: timestampFromDate(r.contradicted_at) }
      : undefined,
    reopening: r.reopened_at ? { actor: r.reopen_actor ?? "", reason: r.reopen_reason ?? "", reopenedAt: timestampFromDate(r.reopened_at) } : undefined,
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
/** A NOT_PAID resolution's failure reason: the code the payout is failed with (RAIL_REJECTED, ...). */
const FAILURE_REASON = /^[A-Z][A-Z0-9_]{0,63}$/;

/** google.protobuf.Timestamp's own valid range (0001-01-01 .. 9999-12-31, nanos < 1e9); outside it: invalid_argument. */
function checkTimestamp(field: string, ts: { seconds: bigint; nanos: number } | undefined): void {
  if (ts === undefined) return;
  if (ts.seconds < -62_135_596_800n || ts.seconds > 253_402_300_799n || ts.nanos < 0 || ts.nanos > 999_999_999) {
    throw invalidArgument(field, REASONS.TIMESTAMP_INVALID, `${field} must be a valid timestamp between 0001-01-01 and 9999-12-31`);
  }
}

/** One page-token codec for every list (shared/domain/page-token.ts); positions are PostgreSQL's created_at::text. */
const encodeCursor = (r: SubmissionRow, scope: string) => encodePageToken({ at: r.cursor, id: r.payout_id }, scope);
function decodeCursor(token: string, scope: string): { cursor: string; payoutId: string } | undefined {
  const position = decodePageToken(token, scope, isTimestampText);
  return position && { cursor: position.at, payoutId: position.id };
}

/** Maps an admission outcome to the answer: the one place that picks its catalogue entries. */
export function submitAnswer(outcome: SubmitOutcome, intent: Intent): Submission {
  switch (outcome.kind) {
    case "ANSWERED":
      return toSubmission(outcome.row);
    case "REFUSED":
      throw refusalError(outcome.refusal, intent);
    case "NOT_FORWARDED":
      throw new DomainError(
        REASONS.NOT_FORWARDED,
        "the rail was not called: admission took longer than the pre-forward budget, or no connection to the rail was made within it. Nothing was paid; submit again under a new reference",
        {
          payout_id: intent.reference,
        },
      );
    case "AMBIGUOUS":
      throw new DomainError(
        REASONS.RAIL_AMBIGUOUS,
        outcome.cause === "RAIL_STATUS_UNKNOWN"
          ? "the rail answered with a status this build does not know; the payout may or may not have moved money. Do not resubmit; it will be reconciled"
          : "the rail's answer was lost; the payout may or may not have moved money. Do not resubmit; it will be reconciled",
        {
          payout_id: intent.reference,
          cause: outcome.cause,
        },
      );
    case "PAYDB_UNAVAILABLE":
      // The money path refuses: retry later, nothing was forwarded.
      return dbUnavailable("PAYDB", outcome.error, "nothing was forwarded");
  }
}

function refusalError(r: Refusal, intent: Intent): DomainError {
  const payout = { payout_id: intent.reference, bound_payout_id: intent.payoutId };
  switch (r.kind) {
    case "FENCED_OUT":
      return new DomainError(REASONS.FENCED_OUT, "fencing token is not above the account's high-water mark; the rail was not called", {
        account_id: intent.accountId,
      });
    case "DUPLICATE":
      return new DomainError(REASONS.DUPLICATE_SUBMISSION, "this reference was already submitted; call GetSubmission", { payout_id: intent.reference });
    case "PAYOUT_ALREADY_SUBMITTED":
      return new DomainError(
        REASONS.PAYOUT_ALREADY_SUBMITTED,
        "the payout already has a live submission; settle that one (GetSubmission), never submit it again",
        {
          ...payout,
          live_submission: r.live ?? "",
        },
      );
    case "PAYOUT_NOT_FOUND":
      return new DomainError(REASONS.BOUND_PAYOUT_NOT_FOUND, "no payout with this id exists in paydb; the rail was not called", payout);
    case "PAYOUT_MISMATCH":
      return new DomainError(REASONS.PAYOUT_MISMATCH, `${r.field} differs from the payout's; the rail was not called`, { ...payout, field: r.field });
    case "PAYOUT_NOT_PAYABLE":
      return new DomainError(REASONS.PAYOUT_NOT_PAYABLE, `the payout is ${r.state}, not PROCESSING; the rail was not called`, { ...payout, state: r.state });
    case "PAYOUT_FENCE_MISMATCH":
      return new DomainError(
        REASONS.PAYOUT_FENCE_MISMATCH,
        r.holder === "NEWER"
          ? "a newer token fenced this payout; the rail was not called"
          : "the payout was not fenced with this token; the rail was not called",
        { ...payout, holder: r.holder },
      );
  }
}

/** The payout a reference pays; an attempt reference must name the token it comes with. */
function bindReference(reference: string, token: bigint): string {
  const { payoutId, token: named } = parseSubmissionRef(reference);
  if (named !== undefined && named !== token) {
    throw invalidArgument("payout_id", REASONS.FIELD_INVALID, "an attempt reference <payout id>:t<token> must name the fencing_token it is submitted with");
  }
  return payoutId;
}

export function proxyRoutes(deps: {
  /** Shared with the lock service: only tokens it signed are admitted (optional). */
  tokenKey?: Buffer;
  rail: RailClient;
  railDeadlineMs: number;
  /**
   * The youngest a submission may be to be resolved NOT_PAID without `force`: before it, its
   * request may still reach the rail (2 x deadline + margin + admission timeout, the settlement
   * window's floor; reconciler/config.ts).
   */
  notPaidMinAgeMs: number;
  store: SubmissionStore;
  submit: Submit;
  metrics: ProxyMetrics;
  replicaId: string;
  logger?: Logger;
}) {
  const { store, submit, metrics } = deps;
  return (router: ConnectRouter) =>
    router.service(RailProxyService, {
      async submitPayout(req) {
        // Step 0: validate every field before anything is written or forwarded.
        const accountId = checkId("account_id", req.accountId);
        const reference = checkId("payout_id", req.payoutId);
        const token = checkToken("fencing_token", req.fencingToken);
        const amount = checkMoney("amount", req.amount);
        const beneficiary = checkBeneficiary("beneficiary", req.beneficiary);
        const payoutId = bindReference(reference, token);
        if (deps.tokenKey && !tokenSignatureValid(deps.tokenKey, accountLockKey(accountId), token, req.fencingTokenSignature)) {
          throw new DomainError(REASONS.TOKEN_SIGNATURE_INVALID, "fencing_token was not issued by the lock service for this account", {
            field: "fencing_token_signature",
          });
        }
        annotate({ "railfence.account_id": accountId, "railfence.payout_id": payoutId, "railfence.fencing_token": token.toString() });
        const intent: Intent = {
          reference,
          payoutId,
          accountId,
          token,
          amountMinor: amount.amountMinor,
          currency: amount.currency,
          beneficiary,
          replicaId: deps.replicaId,
        };
        const outcome = await submit(intent);
        // Decision 072: the statement that recorded ACCEPTED closed the payout; the executor writes nothing more.
        return { submission: submitAnswer(outcome, intent), payoutClosed: outcome.kind === "ANSWERED" && outcome.row.payout_closed === true };
      },

      async getSubmission(req) {
        const payoutId = checkId("payout_id", req.payoutId);
        const row = await readPaydb(() => store.get(payoutId));
        if (!row) throw new DomainError(REASONS.SUBMISSION_NOT_FOUND, "no submission for this payout", { payout_id: payoutId });
        return { submission: toSubmission(row) };
      },

      async listUnresolved(req) {
        const limit = checkPageSize("page_size", req.pageSize, 100, 500);
        const after = decodeCursor(req.pageToken, "ListUnresolved");
        const rows = await readPaydb(() => store.listUnresolved(limit + 1, after));
        const page = rows.slice(0, limit);
        return {
          submissions: page.map(toSubmission),
          nextPageToken: rows.length > limit ? encodeCursor(page[page.length - 1]!, "ListUnresolved") : "",
        };
      },

      async resolveSubmission(req) {
        const payoutId = checkId("payout_id", req.payoutId);
        if (req.outcome !== ResolutionOutcome.PAID && req.outcome !== ResolutionOutcome.NOT_PAID) {
          throw invalidArgument("outcome", REASONS.FIELD_INVALID, "outcome must be PAID or NOT_PAID");
        }
        const actor = checkText("actor", req.actor, 1, 128);
        const note = checkText("note", req.note, 0, 1000);
        const outcome = req.outcome === ResolutionOutcome.PAID ? "PAID" : "NOT_PAID";
        // PAID names the payment that proves it; NOT_PAID says nothing of one.
        const railReference = outcome === "PAID" ? checkText("rail_reference", req.railReference, 1, 128) : null;
        if (outcome === "NOT_PAID" && req.railReference !== "") {
          throw invalidArgument("rail_reference", REASONS.FIELD_INVALID, "rail_reference is for PAID resolutions only");
        }
        if (req.force && outcome !== "NOT_PAID") throw invalidArgument("force", REASONS.FIELD_INVALID, "force is for NOT_PAID resolutions only");
        if (req.force && note.trim().length < 10) {
          throw invalidArgument("note", REASONS.FIELD_INVALID, "a forced NOT_PAID resolution needs a note saying why (at least 10 characters)");
        }
        if (outcome === "PAID" && req.failureReason !== "") {
          throw invalidArgument("failure_reason", REASONS.FIELD_INVALID, "failure_reason is for NOT_PAID resolutions only");
        }
        if (req.failureReason !== "" && !FAILURE_REASON.test(req.failureReason)) {
          throw invalidArgument("failure_reason", REASONS.FIELD_INVALID, "failure_reason is an upper-case code: 1-64 characters of A-Z, 0-9 and _");
        }
        const failureReason = req.failureReason || "RESOLVED_NOT_PAID";
        const minAgeMs = req.force ? 0 : deps.notPaidMinAgeMs;
        const row = await readPaydb(() => store.resolve(payoutId, outcome, actor, note, railReference, minAgeMs, failureReason));
        if (row) {
          metrics.resolved.inc({ outcome: outcome.toLowerCase() });
          if (req.force) deps.logger?.warn({ event: "resolution_forced", payout_id: payoutId, actor, note }, "NOT_PAID forced before the floor");
          if (row.payout_state === "NEEDS_ATTENTION")
            deps.logger?.error(
              { event: "paid_but_failed", payout_id: payoutId, bound_payout_id: row.bound_payout_id, rail_reference: railReference, actor },
              "resolved PAID a payout the books said FAILED: flagged NEEDS_ATTENTION (its client may have paid it again)",
            );
          return { submission: toSubmission(row), payoutState: row.payout_state ?? "" };
        }
        const existing = await readPaydb(() => store.get(payoutId));
        if (!existing) throw new DomainError(REASONS.SUBMISSION_NOT_FOUND, "no submission for this payout", { payout_id: payoutId });
        if (existing.ambiguous && outcome === "NOT_PAID") {
          throw new DomainError(
            REASONS.RESOLUTION_TOO_EARLY,
            `the submission is younger than ${deps.notPaidMinAgeMs} ms: its request may still reach the rail. Wait, or force it with a reason`,
            { payout_id: payoutId, min_age_ms: String(deps.notPaidMinAgeMs) },
          );
        }
        throw new DomainError(REASONS.NOT_AMBIGUOUS, `submission is ${existing.state}, not ambiguous; only ambiguous submissions can be resolved`, {
          payout_id: payoutId,
          state: existing.state,
        });
      },

      async getRailStatement(req) {
        const pageSize = checkPageSize("page_size", req.pageSize, 500, 1000);
        checkTimestamp("since", req.since);
        try {
          // A read moves no money: a slow statement is waited for longer than a submission (at least 5 s).
          const page = await deps.rail.listPayments(
            { since: req.since, afterSequence: req.afterSequence, pageSize },
            { timeoutMs: Math.max(deps.railDeadlineMs, 5000) },
          );
          return { payments: page.payments, hasMore: page.hasMore, coveredUntil: page.coveredUntil };
        } catch (err) {
          throw unavailable(REASONS.RAIL_UNAVAILABLE, "the rail's statement could not be read", 2000, err);
        }
      },

      async listPayoutSubmissions(req) {
        const payoutId = checkId("payout_id", req.payoutId);
        const rows = await readPaydb(() => store.listForPayout(payoutId, 100));
        return { submissions: rows.map(toSubmission) };
      },

      async listNotPaidResolutions(req) {
        if (!req.resolvedSince) throw invalidArgument("resolved_since", REASONS.FIELD_REQUIRED, "resolved_since is required");
        checkTimestamp("resolved_since", req.resolvedSince);
        const limit = checkPageSize("page_size", req.pageSize, 100, 500);
        // Bound to resolved_since too: a token pages only the list it was issued for.
        const scope = `ListNotPaidResolutions:${req.resolvedSince.seconds}.${req.resolvedSince.nanos}`;
        const after = decodeCursor(req.pageToken, scope);
        const rows = await readPaydb(() => store.listNotPaidResolutions(timestampDate(req.resolvedSince!), limit + 1, after));
        const page = rows.slice(0, limit);
        return {
          submissions: page.map(toSubmission),
          nextPageToken: rows.length > limit ? encodeCursor(page[page.length - 1]!, scope) : "",
        };
      },

      async recordContradiction(req) {
        const reference = checkId("payout_id", req.payoutId);
        const railReference = checkText("rail_reference", req.railReference, 1, 128);
        const actor = checkText("actor", req.actor, 1, 128);
        const row = await readPaydb(() => store.recordContradiction(reference, railReference, actor));
        if (row) {
          metrics.contradicted.inc();
          deps.logger?.error(
            { event: "resolution_contradicted", payout_id: reference, bound_payout_id: row.bound_payout_id, rail_reference: railReference, actor },
            "a NOT_PAID resolution is contradicted by the rail's statement; the payout needs a human",
          );
          return { submission: toSubmission(row) };
        }
        const existing = await readPaydb(() => store.get(reference));
        if (!existing) throw new DomainError(REASONS.SUBMISSION_NOT_FOUND, "no submission for this payout", { payout_id: reference });
        if (existing.contradicted_at) return { submission: toSubmission(existing) };
        throw new DomainError(REASONS.NOT_RESOLVED_NOT_PAID, `submission is ${existing.state}; only a NOT_PAID resolution can be contradicted`, {
          payout_id: reference,
          state: existing.state,
        });
      },
    });
}
