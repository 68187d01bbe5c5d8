/**
 * The stub rail's books under group commit (ledger-store.ts): calls that arrive while a booking is
 * in raildb are written by one statement, and the rail stays what it is, not idempotent: two calls
 * with the same client reference in one group are two rows, two payments, each answered with its
 * own. Control: RAIL_STUB_BATCH_MAX=1, one commit per booking.
 */
import { describe, expect, it } from "vitest";
import { createLedgerStore } from "../../services/rail-stub/ledger-store.js";
import { useMigratedDatabase } from "../support/migrated-database.js";
import { countedPool } from "../support/xact-commits.js";

const db = useMigratedDatabase("raildb_group", "raildb");
const url = db.url;

let n = 0;
const booking = (clientReference: string) => ({
  railReference: `rr-group-${++n}`,
  clientReference,
  accountId: "acc-1",
  beneficiary: "ben-1",
  amountMinor: 100n,
  currency: "EUR",
  status: "ACCEPTED" as const,
  reason: "",
});

describe("the stub rail's books, grouped", () => {
  it("the same client reference twice in one group books twice (the rail is not idempotent); each call gets its own row", async () => {
    const counted = await countedPool(url);
    try {
      const ledger = createLedgerStore(counted.pool, 32);
      const calls = [booking("po-first"), booking("po-twice"), booking("po-twice"), booking("po-other")];
      const commits = await counted.commitsOf(async () => {
        const booked = await Promise.all(calls.map((c) => ledger.book(c)));
        expect(booked.map((b) => [b.railReference, b.clientReference])).toEqual(calls.map((c) => [c.railReference, c.clientReference]));
        expect(new Set(booked.map((b) => b.sequence)).size).toBe(4);
      });
      // Two statements in raildb at once: the first two calls leave alone, the two that arrived
      // meanwhile together.
      expect(commits).toBe(3);
      const { payments } = await ledger.list(0n, undefined, 100);
      expect(payments.filter((p) => p.clientReference === "po-twice")).toHaveLength(2);
    } finally {
      await counted.end();
    }
  });

  it("with RAIL_STUB_BATCH_MAX=1 (the control) every booking is a commit of its own", async () => {
    const counted = await countedPool(url);
    try {
      const ledger = createLedgerStore(counted.pool, 1);
      const commits = await counted.commitsOf(() => Promise.all([1, 2, 3, 4].map((i) => ledger.book(booking(`po-alone-${i}`)))));
      expect(commits).toBe(4);
    } finally {
      await counted.end();
    }
  });
});
