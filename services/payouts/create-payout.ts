/**
 * CreatePayout under the Idempotency-Key contract (SPEC "Payouts API"): what every path shares
 * (the command, the result, the answers), and the choice of path.
 *
 * - One statement (create-payout-one-statement.ts, decision 071), when the money limits live in
 *   paydb (LIMITS_DB_URL unset, the default): one round trip, one transaction, one durable
 *   commit settles the key, consumes the limits, inserts the payout and pins the answer.
 * - Stepwise (create-payout-stepwise.ts), when the limits live in a store of their own
 *   (LIMITS_DB_URL): one transaction cannot span two databases, so the key is claimed, the
 *   limits consumed and the payout inserted with its answer in three commits.
 *
 * Both answer every situation of the contract alike; decision 071 lists what differs in between
 * (what another session can see of a request in progress, and how a crashed one frees its key).
 */
import type { Logger } from "../shared/process/logger.js";
import type { CreatePayoutRequest, CreatePayoutResponse } from "../shared/gen/railfence/payouts/v1/payouts_pb.js";
export { KeyReusedError } from "./create-payout-answers.js";
import type { CreatePayoutStatement } from "./create-payout-statement.js";
import { createOneStatementCreator } from "./create-payout-one-statement.js";
import { createStepwiseCreator } from "./create-payout-stepwise.js";
import type { IdempotencyStore } from "./idempotency-store.js";
import type { LimitStore } from "./limit-store.js";
import type { LimitsConfig } from "./limits.js";
import type { NewPayout, PayoutStore } from "./payout-store.js";
import type { PayoutsMetrics } from "./payouts-metrics.js";

export interface CreatePayoutDeps {
  payouts: PayoutStore;
  keys: IdempotencyStore;
  limitStore: LimitStore;
  /** paydb's create_payout(): set when the limits live in paydb, so one statement can do it all. */
  statement: CreatePayoutStatement | null;
  limits: LimitsConfig;
  /** A limit store slower than this is treated as unavailable (the pool's bound already includes the lock waits). */
  limitsTimeoutMs: number;
  /** How long one statement waits for a counter row another request holds (LIMITS_LOCK_WAIT_MS). */
  limitsLockWaitMs: number;
  metrics: PayoutsMetrics;
  logger: Logger;
  lockMs: number;
  retentionMs: number;
}

/** A validated CreatePayout call: the payout to create (its id is assigned here), plus the key
 * and the request its fingerprint is taken from. */
export interface CreatePayoutCommand extends Omit<NewPayout, "payoutId" | "idempotencyKey"> {
  key: string;
  request: CreatePayoutRequest;
}

export interface CreatePayoutResult {
  response: CreatePayoutResponse;
  replayed: boolean;
  /** When the server forgets the key (the header idempotency-key-expires-at). */
  keyExpiresAt: Date;
}

export function createPayoutCreator(deps: CreatePayoutDeps): (cmd: CreatePayoutCommand) => Promise<CreatePayoutResult> {
  return deps.statement ? createOneStatementCreator(deps, deps.statement) : createStepwiseCreator(deps);
}

export type CreatePayout = ReturnType<typeof createPayoutCreator>;
