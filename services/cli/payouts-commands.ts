/**
 * `railfence payouts ...`: the client-facing payouts API, for operators.
 *
 * Every call goes through the railfence client library. `create` is one payout intent: one
 * Idempotency-Key (the operator's --idempotency-key, or a UUID minted and printed *before* the
 * call), reused by the library for every retry of a transient failure, and printed again on a
 * failure, so that after a timeout or a lost answer the operator can repeat the command with
 * the same key and cannot create the payout twice.
 */
import { randomUUID } from "node:crypto";
import { create as createMessage } from "@bufbuild/protobuf";
import { CreatePayoutResponseSchema, GetPayoutResponseSchema, ListPayoutsResponseSchema, PayoutState } from "../../clients/typescript/src/index.js";
import type { CommandContext, CommandSpec } from "./command.js";
import { CallFailed } from "./clients.js";
import { EXIT_OK, UsageError } from "./exit-codes.js";
import { messageJson, printJson } from "./output.js";
import { nextPageHint, payoutDetail, payoutTable } from "./views.js";
import { int8 } from "../shared/domain/int8.js";

function endpoints(ctx: CommandContext): { payouts: string } {
  return { payouts: ctx.endpoints.payouts!.value };
}

/** Amount in minor units: digits only, > 0. "10.50" is refused rather than guessed at. */
export function parseAmountMinor(value: string): bigint {
  if (!/^\d{1,16}$/.test(value.trim())) {
    throw new UsageError(`--amount is in minor units (1050 = 10.50 EUR): a whole number, got "${value}"`);
  }
  const n = int8(value.trim());
  if (n <= 0n) throw new UsageError("--amount must be greater than 0");
  return n;
}

/** --state PAID (or PAYOUT_STATE_PAID, any case). */
export function parsePayoutState(value: string): PayoutState {
  const name = value
    .trim()
    .toUpperCase()
    .replace(/^PAYOUT_STATE_/, "");
  const state = (PayoutState as unknown as Record<string, number | undefined>)[name];
  if (state === undefined || state === PayoutState.UNSPECIFIED) {
    const names = Object.keys(PayoutState).filter((k) => Number.isNaN(Number(k)) && k !== "UNSPECIFIED");
    throw new UsageError(`--state must be one of ${names.join(", ")}, got "${value}"`);
  }
  return state;
}

const create: CommandSpec = {
  words: ["payouts", "create"],
  usage: "payouts create --account A --amount MINOR --currency CUR --beneficiary B [--client-reference R] [--idempotency-key K]",
  summary: "create a payout (an executor pays it later)",
  details: [
    "--amount MINOR          integer minor units: 1050 with EUR is 10.50 EUR",
    "--idempotency-key K     reuse a key to retry safely; minted (UUID) and printed when absent",
  ],
  options: ["account", "amount", "currency", "beneficiary", "client-reference", "idempotency-key"],
  positionals: 0,
  async run(ctx) {
    const request = {
      accountId: ctx.opts.required("account"),
      amount: { amountMinor: parseAmountMinor(ctx.opts.required("amount")), currency: ctx.opts.required("currency") },
      beneficiary: ctx.opts.required("beneficiary"),
      clientReference: ctx.opts.string("client-reference") ?? "",
    };
    const given = ctx.opts.string("idempotency-key");
    if (given !== undefined && given.trim() === "") throw new UsageError("--idempotency-key must not be empty");
    const key = given ?? randomUUID();
    // Printed first, on stderr, in every output mode: if the call hangs, the answer is lost or
    // the CLI is killed, the key is already on screen (under --json as one JSON line, so stdout
    // keeps exactly one object: the result).
    if (ctx.json) ctx.output.err(JSON.stringify({ idempotencyKey: key }));
    else if (!given) ctx.output.err(`idempotency-key: ${key} (retry with --idempotency-key ${key})`);
    try {
      const { payout, replayed, keyExpiresAt } = await ctx.connections.withLibrary(endpoints(ctx), async (rf) =>
        (await rf.payouts.intent(request, { key })).submit(),
      );
      // Until when the key may be repeated; after it, `payouts lookup --idempotency-key` finds the payout.
      const expires = keyExpiresAt?.toISOString() ?? "";
      if (ctx.json) {
        printJson(ctx.output, {
          idempotencyKey: key,
          idempotencyKeyExpiresAt: expires,
          replayed,
          ...(messageJson(CreatePayoutResponseSchema, createMessage(CreatePayoutResponseSchema, { payout })) as object),
        });
      } else {
        ctx.output.out(
          `${replayed ? "replayed (created earlier with this key)" : "created"}\n\n${payoutDetail(payout)}\n\nidempotency-key: ${key}${expires ? ` (the server remembers it until ${expires})` : ""}`,
        );
      }
      return EXIT_OK;
    } catch (err) {
      if (err instanceof CallFailed) {
        err.hasEffect = true;
        // The key is what makes a retry safe: under --json it goes into the one error object.
        if (ctx.json) err.context.idempotencyKey = key;
        else ctx.output.err(`idempotency-key: ${key} (to retry safely, repeat the command with --idempotency-key ${key})`);
      }
      throw err;
    }
  },
};

const get: CommandSpec = {
  words: ["payouts", "get"],
  usage: "payouts get <payout_id>",
  summary: "show one payout",
  options: [],
  positionals: 1,
  async run(ctx) {
    const payoutId = ctx.args[0]!;
    const payout = await ctx.connections.withLibrary(endpoints(ctx), (rf) => rf.payouts.get(payoutId));
    if (ctx.json) printJson(ctx.output, messageJson(GetPayoutResponseSchema, createMessage(GetPayoutResponseSchema, { payout })));
    else ctx.output.out(payoutDetail(payout));
    return EXIT_OK;
  },
};

const lookup: CommandSpec = {
  words: ["payouts", "lookup"],
  usage: "payouts lookup (--idempotency-key K | --client-reference R)",
  summary: "find a payout by the Idempotency-Key that created it, or by its client reference",
  details: [
    "--idempotency-key K     the key of the create (also after the server's retention of the key ended)",
    "--client-reference R    the client reference it was created with (refused when several payouts share it)",
  ],
  options: ["idempotency-key", "client-reference"],
  positionals: 0,
  async run(ctx) {
    const key = ctx.opts.string("idempotency-key");
    const reference = ctx.opts.string("client-reference");
    if ((key === undefined) === (reference === undefined)) throw new UsageError("give exactly one of --idempotency-key and --client-reference");
    if ((key ?? reference)!.trim() === "") throw new UsageError(`--${key !== undefined ? "idempotency-key" : "client-reference"} must not be empty`);
    const payout = await ctx.connections.withLibrary(endpoints(ctx), (rf) =>
      rf.payouts.lookup(key !== undefined ? { idempotencyKey: key } : { clientReference: reference! }),
    );
    if (ctx.json) printJson(ctx.output, messageJson(GetPayoutResponseSchema, createMessage(GetPayoutResponseSchema, { payout })));
    else ctx.output.out(payoutDetail(payout));
    return EXIT_OK;
  },
};

const list: CommandSpec = {
  words: ["payouts", "list"],
  usage: "payouts list [--account A] [--state PENDING|PROCESSING|PAID|FAILED|UNKNOWN|NEEDS_ATTENTION] [--page-size N] [--page-token T]",
  summary: "list payouts, newest first",
  options: ["account", "state", "page-size", "page-token"],
  positionals: 0,
  async run(ctx) {
    const stateText = ctx.opts.string("state");
    const req = {
      accountId: ctx.opts.string("account") ?? "",
      state: stateText === undefined ? PayoutState.UNSPECIFIED : parsePayoutState(stateText),
      pageSize: ctx.opts.integer("page-size", 1, 500) ?? 0,
      pageToken: ctx.opts.string("page-token") ?? "",
    };
    const res = await ctx.connections.withLibrary(endpoints(ctx), (rf) => rf.payouts.list(req));
    if (ctx.json) printJson(ctx.output, messageJson(ListPayoutsResponseSchema, res));
    else if (res.payouts.length === 0) ctx.output.out("no payouts");
    else ctx.output.out([payoutTable(res.payouts), ...nextPageHint(res.nextPageToken)].join("\n"));
    return EXIT_OK;
  },
};

export const payoutCommands: readonly CommandSpec[] = [create, get, lookup, list];
