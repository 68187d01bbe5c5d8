import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { PaymentSchema, PaymentStatus } from "../gen/railfence/rail/v1/rail_pb.js";
import { statementPages, type StatementPageReader } from "./rail-statement.js";

const payment = (sequence: bigint, status: number) =>
  create(PaymentSchema, { railReference: `rr${sequence}`, clientReference: `po-${sequence}`, status: status as PaymentStatus, sequence });

describe("the one statement reader", () => {
  it("pages by sequence, keeps the first page's coverage, and reads a status it does not know as UNKNOWN, never REJECTED", async () => {
    const asked: bigint[] = [];
    const pagesOf = [
      { payments: [payment(1n, PaymentStatus.ACCEPTED), payment(2n, PaymentStatus.REJECTED)], hasMore: true, coveredUntil: timestampFromDate(new Date(1000)) },
      { payments: [payment(3n, 7), payment(4n, PaymentStatus.UNSPECIFIED)], hasMore: false, coveredUntil: timestampFromDate(new Date(5000)) },
    ];
    const read: StatementPageReader = async (req) => {
      asked.push(req.afterSequence);
      return pagesOf[asked.length - 1]!;
    };
    const got = [];
    for await (const page of statementPages(read, undefined)) got.push(page);
    expect(asked).toEqual([0n, 2n]);
    expect(got.map((p) => p.coveredUntil.getTime())).toEqual([1000, 1000]);
    expect(got.flatMap((p) => p.entries.map((e) => e.status))).toEqual(["ACCEPTED", "REJECTED", "UNKNOWN", "UNKNOWN"]);
  });

  it("stops on an empty page even when the rail says more follow", async () => {
    let calls = 0;
    const read: StatementPageReader = async () => {
      calls++;
      return { payments: [], hasMore: true };
    };
    for await (const _ of statementPages(read, new Date(0))) {
      // drain
    }
    expect(calls).toBe(1);
  });
});
