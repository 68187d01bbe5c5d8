/**
 * Human views of railfence messages. Money is shown in major units with its currency and
 * tokens as plain integers; an ambiguous submission says so loudly, because that is the one
 * state where an operator must not act on a guess.
 */
import { PayoutState, ResolutionOutcome, SubmissionState, type Payout, type Submission } from "../../clients/typescript/src/index.js";
import type { InspectResponse } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import { enumName, formatFields, formatMoney, formatTable, formatTime } from "./output.js";

/** "TIMEOUT (AMBIGUOUS: unresolved)" for ambiguous rows, the bare state otherwise. */
export function submissionStateLabel(s: Submission): string {
  const state = enumName(SubmissionState, s.state);
  return s.ambiguous ? `${state} (AMBIGUOUS: unresolved)` : state;
}

export function submissionDetail(s: Submission): string {
  const fields: [string, string][] = [
    ["payout_id", s.payoutId],
    ["account_id", s.accountId],
    ["state", submissionStateLabel(s)],
    ["amount", formatMoney(s.amount)],
    ["beneficiary", s.beneficiary],
    ["fencing_token", s.fencingToken.toString()],
    ["rail_reference", s.railReference],
    ["rail_reason", s.railReason],
    ["replica_id", s.replicaId],
    ["created_at", formatTime(s.createdAt)],
    ["updated_at", formatTime(s.updatedAt)],
  ];
  if (s.boundPayoutId && s.boundPayoutId !== s.payoutId) fields.splice(1, 0, ["bound_payout_id", s.boundPayoutId]);
  const r = s.resolution;
  if (r) {
    fields.push(
      ["resolution", enumName(ResolutionOutcome, r.outcome)],
      ["resolved_by", r.actor],
      ["resolved_at", formatTime(r.resolvedAt)],
      ["previous_state", enumName(SubmissionState, r.previousState)],
      ["note", r.note],
    );
  }
  if (s.lateAnswer) {
    fields.push(
      ["LATE RAIL ANSWER", `${enumName(SubmissionState, s.lateAnswer.state)} ${s.lateAnswer.railReference} (after the resolution: a human must look)`],
      ["late_answered_at", formatTime(s.lateAnswer.answeredAt)],
    );
  }
  if (s.contradiction) {
    fields.push(
      ["CONTRADICTED", `the rail's statement shows payment ${s.contradiction.railReference} (found by ${s.contradiction.actor})`],
      ["contradicted_at", formatTime(s.contradiction.recordedAt)],
    );
  }
  return formatFields(fields);
}

export function submissionTable(list: readonly Submission[]): string {
  return formatTable(
    ["PAYOUT", "ACCOUNT", "STATE", "AMOUNT", "TOKEN", "REPLICA", "CREATED"],
    list.map((s) => [s.payoutId, s.accountId, enumName(SubmissionState, s.state), formatMoney(s.amount), s.fencingToken.toString(), s.replicaId, formatTime(s.createdAt)]),
  );
}

export function payoutDetail(p: Payout): string {
  const attention: [string, string][] = p.attention
    ? [
        ["ATTENTION", `${p.attention.reason}: ${p.attention.detail}`],
        ["flagged_at", formatTime(p.attention.flaggedAt)],
      ]
    : [];
  return formatFields([
    ["payout_id", p.payoutId],
    ["account_id", p.accountId],
    ["state", enumName(PayoutState, p.state)],
    ["amount", formatMoney(p.amount)],
    ["beneficiary", p.beneficiary],
    ["client_reference", p.clientReference],
    ["fence", p.fence.toString()],
    ["rail_reference", p.railReference],
    ["failure_reason", p.failureReason],
    ...attention,
    ["created_at", formatTime(p.createdAt)],
    ["updated_at", formatTime(p.updatedAt)],
  ]);
}

export function payoutTable(list: readonly Payout[]): string {
  return formatTable(
    ["PAYOUT", "ACCOUNT", "STATE", "AMOUNT", "BENEFICIARY", "CREATED"],
    list.map((p) => [p.payoutId, p.accountId, enumName(PayoutState, p.state), formatMoney(p.amount), p.beneficiary, formatTime(p.createdAt)]),
  );
}

export function lockDetail(l: InspectResponse): string {
  return formatFields([
    ["key", l.key],
    ["held", l.held ? "yes" : "no"],
    ["owner", l.owner],
    ["fencing_token", l.held ? l.fencingToken.toString() : ""],
    ["expires_at", formatTime(l.expiresAt)],
    ["last_token", l.lastToken.toString()],
  ]);
}

/** "next page: --page-token X" footer, or nothing on the last page. */
export function nextPageHint(token: string): string[] {
  return token ? ["", `more results: --page-token ${token}`] : [];
}
