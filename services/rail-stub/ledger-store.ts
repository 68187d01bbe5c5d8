/** The stub rail's books in raildb. The only layer that knows SQL. */
import { groupCommit } from "../shared/db/group-commit.js";
import { isRowRefusal, type Pool } from "../shared/db/pg.js";
import { int8 } from "../shared/domain/int8.js";

export interface BookedPayment {
  sequence: bigint;
  railReference: string;
  clientReference: string;
  accountId: string;
  beneficiary: string;
  amountMinor: bigint;
  currency: string;
  status: "ACCEPTED" | "REJECTED";
  reason: string;
  bookedAt: Date;
}

/** A row of the stub's `payments` table (the harness's ledger cross-check reads the same rows). */
export interface LedgerRow {
  sequence: string;
  rail_reference: string;
  client_reference: string;
  account_id: string;
  beneficiary: string;
  amount_minor: string;
  currency: string;
  status: "ACCEPTED" | "REJECTED";
  reason: string;
  booked_at: Date;
}

const toPayment = (r: LedgerRow): BookedPayment => ({
  sequence: int8(r.sequence),
  railReference: r.rail_reference,
  clientReference: r.client_reference,
  accountId: r.account_id,
  beneficiary: r.beneficiary,
  amountMinor: int8(r.amount_minor),
  currency: r.currency,
  status: r.status,
  reason: r.reason,
  bookedAt: r.booked_at,
});

type Booking = Omit<BookedPayment, "sequence" | "bookedAt">;

const bookingValues = (p: Booking) => [
  p.railReference,
  p.clientReference,
  p.accountId,
  p.beneficiary,
  p.amountMinor.toString(),
  p.currency,
  p.status,
  p.reason,
];

/** Books: one row per call, never merged (the rail has no notion of a duplicate). `batchMax` > 1:
 * the calls that arrive while a booking statement is in raildb are written together (group commit). */
export function createLedgerStore(pool: Pool, batchMax = 1) {
  async function bookAlone(p: Booking): Promise<BookedPayment> {
    // Named: prepared once per connection (every payment runs it).
    const { rows } = await pool.query<LedgerRow>({
      name: "rail_book",
      text: `INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status, reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
      values: bookingValues(p),
    });
    return toPayment(rows[0]!);
  }

  async function bookGroup(items: Booking[]): Promise<BookedPayment[]> {
    if (items.length === 1) return [await bookAlone(items[0]!)];
    const columns = items.map(bookingValues);
    const { rows } = await pool.query<LedgerRow>({
      name: "rail_book_group",
      text: `INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status, reason)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::text[], $7::text[], $8::text[]) RETURNING *`,
      values: columns[0]!.map((_, k) => columns.map((c) => c[k])),
    });
    // Each call's own row, by the rail reference this stub made for it (unique).
    const booked = new Map(rows.map((r) => [r.rail_reference, toPayment(r)]));
    return items.map((p) => booked.get(p.railReference)!);
  }

  const book = batchMax > 1 ? groupCommit(bookGroup, { maxBatch: batchMax, maxInFlight: 2, alone: { run: bookAlone, when: isRowRefusal } }) : bookAlone;

  return {
    /** Books a payment. Always a new row: the rail has no notion of a duplicate. */
    book: (p: Booking): Promise<BookedPayment> => book(p),

    /** One page of the statement, plus the instant up to which it is complete. */
    async list(afterSequence: bigint, since: Date | undefined, limit: number) {
      const { rows } = await pool.query<LedgerRow & { covered_until: Date }>(
        `SELECT p.*, now() - interval '1 second' AS covered_until
           FROM (SELECT 1) one
           LEFT JOIN LATERAL (
             SELECT * FROM payments
              WHERE sequence > $1 AND ($2::timestamptz IS NULL OR booked_at >= $2)
              ORDER BY sequence LIMIT $3) p ON true`,
        [afterSequence.toString(), since ?? null, limit + 1],
      );
      const coveredUntil = rows[0]!.covered_until;
      const payments = rows.filter((r) => r.sequence !== null).map(toPayment);
      return { payments: payments.slice(0, limit), hasMore: payments.length > limit, coveredUntil };
    },
  };
}

export type LedgerStore = ReturnType<typeof createLedgerStore>;
