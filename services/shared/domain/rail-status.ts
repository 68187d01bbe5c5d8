/**
 * What a rail payment status proves: the one reading of the rail's status for the rail-proxy
 * (an answer to SubmitPayment) and the reconciler (a line of the statement).
 *
 * Only the two statuses the rail protocol documents are answers (proto/railfence/rail/v1/rail.proto):
 * ACCEPTED (the rail booked the payment: money moved) and REJECTED (the rail refused it: no money
 * moved, final). Anything else (the proto3 default left unset, or a value this build does not
 * know, such as a PENDING or QUEUED a rail adds later) proves nothing either way: it is
 * UNKNOWN, handled as ambiguity (the submission is recorded TIMEOUT and the reconciler or a
 * human decides from the statement), never as "not paid".
 */
import { PaymentStatus } from "../gen/railfence/rail/v1/rail_pb.js";

export type RailStatusReading = "ACCEPTED" | "REJECTED" | "UNKNOWN";

// [rule:unknown-status]
export function readRailStatus(status: PaymentStatus | number): RailStatusReading {
  switch (status) {
    case PaymentStatus.ACCEPTED:
      return "ACCEPTED";
    case PaymentStatus.REJECTED:
      return "REJECTED";
    default:
      return "UNKNOWN";
  }
}
// [/rule:unknown-status]

/** The rail's raw status for logs and ambiguity notes: its name when this build knows it, else its number. */
export function railStatusName(status: PaymentStatus | number): string {
  return PaymentStatus[status] ?? String(status);
}
