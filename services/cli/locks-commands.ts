/**
 * `railfence locks inspect <key>`: who holds an account lock and which token was issued last.
 * Read-only on purpose: an operator who "breaks" a lock gains nothing (safety comes from the
 * fences), and the lease id (a capability) is never shown by the service anyway.
 */
import { InspectResponseSchema, LockService } from "../shared/gen/railfence/lock/v1/lock_pb.js";
import type { CommandSpec } from "./command.js";
import { EXIT_OK } from "./exit-codes.js";
import { messageJson, printJson } from "./output.js";
import { lockDetail } from "./views.js";

const inspect: CommandSpec = {
  words: ["locks", "inspect"],
  usage: "locks inspect <key>",
  summary: "show the holder, fencing token and expiry of a lock (e.g. account:acc-42)",
  options: [],
  positionals: 1,
  async run(ctx) {
    const key = ctx.args[0]!;
    const res = await ctx.connections.call(LockService, ctx.endpoints.lock!.value, (c) => c.inspect({ key }));
    if (ctx.json) printJson(ctx.output, messageJson(InspectResponseSchema, res));
    else ctx.output.out(lockDetail(res));
    return EXIT_OK;
  },
};

export const lockCommands: readonly CommandSpec[] = [inspect];
