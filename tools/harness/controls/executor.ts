/**
 * An executor's staged behaviours, built by the harness and handed to the product's factory
 * (services/executor/executor.ts, ExecutorControls; decision 064). The product reads none of these
 * variables; only the harness entry does (entries/executor.ts):
 *
 * - EXECUTOR_PAUSE_AFTER_FENCE_MS: hold still right before SubmitPayout, so a stale-holder window
 *   opens on demand.
 * - EXECUTOR_SUBMISSION_REFERENCE=attempt: attempt-shaped references, the untrusted worst case
 *   (services/shared/domain/submission-ref.ts).
 * - EXECUTOR_TRUST_NOT_FOUND=true: NOT_FOUND after a lost answer read as "never sent" and the payout
 *   submitted again (the reading before decision 023), a negative control.
 * - EXECUTOR_TRUST_ACCEPTED=true: nothing written after any ACCEPTED answer, whether or not the
 *   proxy says it closed the payout (payout_closed), a negative control for decision 072.
 */
import { z } from "zod";
import type { ExecutorControls } from "../../../services/executor/executor.js";
import { env as envTypes, loadConfig } from "../../../services/shared/process/config.js";

const schema = z.object({
  EXECUTOR_PAUSE_AFTER_FENCE_MS: envTypes.ms(0, 0, 3_600_000),
  EXECUTOR_SUBMISSION_REFERENCE: z.enum(["payout", "attempt"]).default("payout"),
  EXECUTOR_TRUST_NOT_FOUND: envTypes.bool(false),
  EXECUTOR_TRUST_ACCEPTED: envTypes.bool(false),
});

/** The behaviours env asks for; undefined when it asks for none (the product as it ships). */
export function executorControls(env: NodeJS.ProcessEnv): ExecutorControls | undefined {
  const c = loadConfig(schema, env);
  const planted: string[] = [];
  if (c.EXECUTOR_PAUSE_AFTER_FENCE_MS > 0) planted.push(`EXECUTOR_PAUSE_AFTER_FENCE_MS=${c.EXECUTOR_PAUSE_AFTER_FENCE_MS}`);
  if (c.EXECUTOR_SUBMISSION_REFERENCE === "attempt") planted.push("EXECUTOR_SUBMISSION_REFERENCE=attempt");
  if (c.EXECUTOR_TRUST_NOT_FOUND) planted.push("EXECUTOR_TRUST_NOT_FOUND=true");
  if (c.EXECUTOR_TRUST_ACCEPTED) planted.push("EXECUTOR_TRUST_ACCEPTED=true");
  if (planted.length === 0) return undefined;
  return {
    planted,
    pauseAfterFenceMs: c.EXECUTOR_PAUSE_AFTER_FENCE_MS,
    submissionReference: c.EXECUTOR_SUBMISSION_REFERENCE,
    trustNotFound: c.EXECUTOR_TRUST_NOT_FOUND,
    trustAccepted: c.EXECUTOR_TRUST_ACCEPTED,
  };
}
