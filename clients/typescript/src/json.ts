/**
 * Payouts as JSON. Messages carry int64 fields as bigint (amounts in minor units, fencing
 * tokens), and `JSON.stringify` throws on a bigint ("Do not know how to serialize a BigInt").
 * These helpers use the protobuf JSON mapping, the same one the Connect JSON protocol speaks:
 * int64 as decimal strings, enums by name, timestamps as RFC 3339; what they write, they read
 * back to an equal message.
 */
import { fromJson, toJson, type JsonObject } from "@bufbuild/protobuf";
import { type Payout, PayoutSchema } from "./gen/railfence/payouts/v1/payouts_pb.js";

/** A payout as a plain JSON object (safe for JSON.stringify, logs, queues, caches). */
export function payoutToJson(payout: Payout): JsonObject {
  return toJson(PayoutSchema, payout) as JsonObject;
}

/** The payout payoutToJson wrote; unknown fields are refused, as the servers refuse them. */
export function payoutFromJson(json: unknown): Payout {
  return fromJson(PayoutSchema, json as JsonObject);
}

/**
 * A JSON.stringify replacer that writes bigints as decimal strings, for objects that hold
 * messages among other data (`JSON.stringify(result, bigintReplacer)`). Reading them back as
 * messages goes through payoutFromJson, which accepts int64 as strings.
 */
export function bigintReplacer(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}
