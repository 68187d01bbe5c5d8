/**
 * `railfence submissions ...`: the intent ledger kept by the rail-proxy. These commands read
 * it (through the railfence client library: retried reads, rotating over replicas) and close
 * ambiguous submissions (UC-07; sent once, to the first replica that answers). Nothing here can
 * submit to the rail: an ambiguous submission is closed by a human verdict, never by trying again.
 */
import { create as createMessage } from "@bufbuild/protobuf";
import {
  GetSubmissionResponseSchema,
  ListUnresolvedResponseSchema,
  RailProxyService,
  ResolutionOutcome,
  ResolveSubmissionResponseSchema,
  type Submission,
} from "../../clients/typescript/src/index.js";
import type { CommandContext, CommandSpec } from "./command.js";
import { EXIT_OK, EXIT_USAGE, UsageError } from "./exit-codes.js";
import { formatMoney, messageJson, printJson } from "./output.js";
import { nextPageHint, submissionDetail, submissionStateLabel, submissionTable } from "./views.js";

function proxies(ctx: CommandContext): string[] {
  return ctx.endpoints.railProxy?.value ?? [];
}

/** Parses --outcome; only the two verdicts the API accepts. */
export function parseOutcome(value: string): ResolutionOutcome {
  const v = value.trim().toUpperCase().replace(/-/g, "_");
  if (v === "PAID") return ResolutionOutcome.PAID;
  if (v === "NOT_PAID") return ResolutionOutcome.NOT_PAID;
  throw new UsageError(`--outcome must be PAID or NOT_PAID, got "${value}"`);
}

const get: CommandSpec = {
  words: ["submissions", "get"],
  usage: "submissions get <payout_id>",
  summary: "show the rail-proxy's intent-ledger row for a payout",
  options: [],
  positionals: 1,
  async run(ctx) {
    const payoutId = ctx.args[0]!;
    const submission = await ctx.connections.withLibrary({ railProxy: proxies(ctx) }, (rf) => rf.railProxy.getSubmission(payoutId));
    if (ctx.json) printJson(ctx.output, messageJson(GetSubmissionResponseSchema, createMessage(GetSubmissionResponseSchema, { submission })));
    else ctx.output.out(submissionDetail(submission));
    return EXIT_OK;
  },
};

const unresolved: CommandSpec = {
  words: ["submissions", "unresolved"],
  usage: "submissions unresolved [--page-size N] [--page-token T]",
  summary: "list ambiguous submissions waiting for the reconciler or a human, oldest first",
  options: ["page-size", "page-token"],
  positionals: 0,
  async run(ctx) {
    const pageSize = ctx.opts.integer("page-size", 1, 500) ?? 0;
    const pageToken = ctx.opts.string("page-token") ?? "";
    const res = await ctx.connections.withLibrary({ railProxy: proxies(ctx) }, (rf) => rf.railProxy.listUnresolved({ pageSize, pageToken }));
    if (ctx.json) {
      printJson(ctx.output, messageJson(ListUnresolvedResponseSchema, res));
    } else if (res.submissions.length === 0) {
      ctx.output.out("no unresolved submissions");
    } else {
      ctx.output.out([submissionTable(res.submissions), ...nextPageHint(res.nextPageToken)].join("\n"));
    }
    return EXIT_OK;
  },
};

function describeForConfirmation(s: Submission, outcome: string, actor: string): string {
  return [
    `About to resolve payout ${s.payoutId} as ${outcome}, as "${actor}".`,
    `  state: ${submissionStateLabel(s)}; account ${s.accountId}; ${formatMoney(s.amount)} to ${s.beneficiary}; token ${s.fencingToken}`,
    outcome === "PAID"
      ? "  PAID means the money moved: confirm it is on the rail's statement."
      : "  NOT_PAID means the money did not move: confirm it is absent from the rail's statement.",
    "This is recorded with your name and cannot be undone. Continue? [y/N] ",
  ].join("\n");
}

const resolve: CommandSpec = {
  words: ["submissions", "resolve"],
  usage: "submissions resolve <payout_id> --outcome PAID|NOT_PAID --actor NAME --note TEXT [--rail-reference R] [--force] [--yes]",
  summary: "close an ambiguous submission with a verdict (asks for confirmation unless --yes)",
  details: [
    "--outcome PAID|NOT_PAID  the verdict, from the rail's statement",
    "--actor NAME             who decides (required; recorded in the ledger)",
    "--note TEXT              why (required; e.g. the statement line or ticket)",
    "--rail-reference R       PAID only, required: the rail's reference of the payment on the statement",
    "--force                  NOT_PAID only: before the proxy's floor (its request may still reach the rail); the note must say why",
    "--yes, -y                do not ask for confirmation",
  ],
  options: ["outcome", "actor", "note", "rail-reference", "force", "yes"],
  positionals: 1,
  async run(ctx) {
    const payoutId = ctx.args[0]!;
    // Every check happens before any call: a refused command changes nothing.
    const outcomeText = ctx.opts.required("outcome");
    const outcome = parseOutcome(outcomeText);
    const actor = ctx.opts.required("actor");
    const note = ctx.opts.required("note");
    const outcomeName = outcome === ResolutionOutcome.PAID ? "PAID" : "NOT_PAID";
    const railReference = ctx.opts.string("rail-reference") ?? "";
    const force = ctx.opts.flag("force");
    if (outcomeName === "PAID" && railReference === "") throw new UsageError("--outcome PAID needs --rail-reference: the payment on the rail's statement");
    if (outcomeName === "NOT_PAID" && railReference !== "") throw new UsageError("--rail-reference is for --outcome PAID only");
    if (force && outcomeName !== "NOT_PAID") throw new UsageError("--force is for --outcome NOT_PAID only");
    if (!ctx.opts.flag("yes")) {
      // Show the operator what they are about to close; an unknown payout stops here (exit 4).
      const current = await ctx.connections.withLibrary({ railProxy: proxies(ctx) }, (rf) => rf.railProxy.getSubmission(payoutId));
      const ok = await ctx.confirm(describeForConfirmation(current, outcomeName, actor));
      if (!ok) {
        ctx.output.err("not confirmed: nothing was changed (pass --yes to skip the question)");
        return EXIT_USAGE;
      }
    }
    const res = await ctx.connections.callAny(RailProxyService, proxies(ctx), (c) =>
      c.resolveSubmission({ payoutId, outcome, actor, note, railReference, force }),
    );
    if (ctx.json) printJson(ctx.output, messageJson(ResolveSubmissionResponseSchema, res));
    else {
      // The same statement closed the payout (decision 066); say what it did to it.
      const payout = res.payoutState
        ? `payout ${res.submission!.boundPayoutId} is now ${res.payoutState}`
        : `payout ${res.submission!.boundPayoutId} was left as it was (already closed, or a newer holder is paying it)`;
      ctx.output.out(`resolved ${payoutId} as ${outcomeName}\n${payout}\n\n${submissionDetail(res.submission!)}`);
    }
    return EXIT_OK;
  },
};

export const submissionCommands: readonly CommandSpec[] = [get, unresolved, resolve];
