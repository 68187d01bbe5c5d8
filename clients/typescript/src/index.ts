/**
 * @railfence/client: a TypeScript client for railfence that makes the safe path the easy one.
 * See README.md beside this package.
 */
export { createRailfenceClient, type RailfenceClient, type RailfenceClientOptions } from "./client.js";
export {
  PayoutIntent,
  PayoutsClient,
  requestFingerprint,
  IDEMPOTENCY_KEY_HEADER,
  REPLAYED_HEADER,
  EXPIRES_AT_HEADER,
  RETENTION_HEADER,
  type CreatePayoutResult,
  type IntentOptions,
  type PayoutRequest,
} from "./payouts.js";
export { RailProxyClient, outcomeUnknown, type SubmitPayoutInit } from "./rail-proxy.js";
export { RailfenceError, OutcomeUnknownError, IntentMismatchError, IntentExpiredError, retryHintMs, serverAnswered, type GaveUp } from "./errors.js";
// The catalogue of error reasons (generated from the servers' own, services/shared/domain/reasons.ts).
export { REASONS, ALL_REASONS, AREAS, findReason, isReason } from "./reasons.js";
export type { Area, Reason, ReasonEntry, ReasonId, Retry } from "./reasons.js";
export { FileKeyStore, MemoryKeyStore, type IntentKeyStore, type StoredIntentKey } from "./key-store.js";
export { classifyOutcome, isConfigurationFailure, isRetryable, type Outcome } from "./outcome.js";
export { isTransient, backoffMs, RetryBudget, type RetryOptions } from "./retry.js";
export type { CallOptions } from "./attempts.js";
export { tlsFromFiles, type TlsFiles, type TlsOptions, type TransportOptions } from "./transport.js";
export { payoutToJson, payoutFromJson, bigintReplacer } from "./json.js";
export { tracingInterceptor } from "./tracing.js";
// The contracts, generated from the repository's protos (src/gen): messages, enums, services.
export * from "./gen/railfence/payouts/v1/payouts_pb.js";
export * from "./gen/railfence/railproxy/v1/rail_proxy_pb.js";
export * from "./gen/railfence/common/v1/money_pb.js";
export { PaymentSchema, PaymentStatus, type Payment } from "./gen/railfence/rail/v1/rail_pb.js";
export { ErrorInfoSchema, RetryInfoSchema, type ErrorInfo, type RetryInfo } from "./gen/google/rpc/error_details_pb.js";
