/**
 * The checker can fail: one planted corruption per invariant, in real databases, read the way
 * production reads them (paydb as the auditor role, the statement through rail-proxy), and the
 * checker must name it. Each test plants its own payouts and accounts and looks only at the
 * violations that mention them; a clean history planted the same way must produce none.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useMesh } from "../support/use-mesh.js";
import { checkInvariants, meshCheckTarget, type CheckResult } from "../../tools/harness/invariants.js";
import { runAudit } from "../../services/cli/audit/audit.js";
import type { StatementSource } from "../../services/cli/audit/statement.js";
import { installUnguardedAdmission } from "../../tools/harness/unguarded-admission.js";
import { poolFor } from "../executor/support.js";

let seq = 0;

const t = useMesh({ proxies: 1 });

interface Paid {
  payoutId: string;
  accountId: string;
  token: bigint;
  railReference: string;
}

const rr = () => `rr_${randomBytes(8).toString("hex")}`;
const AMOUNT = 1200n;
const BEN = "ben-planted";

async function payout(
  payoutId: string,
  accountId: string,
  state = "PENDING",
  fence = 0n,
  railReference: string | null = null,
  content: { amount?: bigint; beneficiary?: string } = {},
) {
  await t.paydb.query(
    `INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence, rail_reference)
     VALUES ($1, 'planted', $2, $3, 'EUR', $4, $5, $6, $7)`,
    [payoutId, accountId, (content.amount ?? AMOUNT).toString(), content.beneficiary ?? BEN, state, fence.toString(), railReference],
  );
}

/**
 * The admission statement itself, as the owner: intent + mark + mark history, as the proxy leaves
 * them. A guard removed: the harness's own statement, installed into this throwaway paydb first.
 */
async function admit(reference: string, payoutId: string, accountId: string, token: bigint, guards = { mark: true, binding: true, oneLive: true }) {
  const values = [reference, payoutId, accountId, token.toString(), AMOUNT.toString(), BEN];
  const allOn = guards.mark && guards.binding && guards.oneLive;
  if (!allOn) await installUnguardedAdmission(t.mesh.ownerUrls.paydb!);
  const { rows } = allOn
    ? await t.paydb.query<{ outcome: string }>("SELECT outcome FROM rail_admit($1, $2, $3, $4, $5, 'EUR', $6, 'planted')", values)
    : await t.paydb.query<{ outcome: string }>("SELECT outcome FROM harness_rail_admit($1, $2, $3, $4, $5, 'EUR', $6, 'planted', $7, $8, $9)", [
        ...values,
        guards.mark,
        guards.binding,
        guards.oneLive,
      ]);
  expect(rows[0]!.outcome).toBe("ADMITTED");
}

async function settle(reference: string, state: "ACCEPTED" | "REJECTED" | "TIMEOUT" | "NOT_FORWARDED", railReference: string | null = null) {
  await t.paydb.query("UPDATE rail_submissions SET state = $2, rail_reference = $3 WHERE payout_id = $1", [reference, state, railReference]);
}

async function resolve(reference: string, outcome: "PAID" | "NOT_PAID") {
  await t.paydb.query(
    `UPDATE rail_submissions SET previous_state = state, state = $2, resolution_outcome = $3, resolution_actor = 'planted', resolution_note = '', resolved_at = now()
      WHERE payout_id = $1`,
    [reference, outcome === "PAID" ? "RESOLVED_PAID" : "RESOLVED_NOT_PAID", outcome],
  );
}

async function railPays(reference: string, accountId: string, railReference = rr(), content: { amount?: bigint; beneficiary?: string; status?: string } = {}) {
  await t.raildb.query(
    "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ($1, $2, $3, $4, $5, 'EUR', $6)",
    [railReference, reference, accountId, content.beneficiary ?? BEN, (content.amount ?? AMOUNT).toString(), content.status ?? "ACCEPTED"],
  );
  return railReference;
}

/** A payout paid once, exactly as the honest path leaves it. */
async function cleanPaid(): Promise<Paid> {
  const n = ++seq;
  const payoutId = `po-planted-${n}`;
  const accountId = `acc-planted-${n}`;
  const token = 5n;
  await payout(payoutId, accountId, "PROCESSING", token);
  await admit(payoutId, payoutId, accountId, token);
  const railReference = await railPays(payoutId, accountId);
  await settle(payoutId, "ACCEPTED", railReference);
  await t.paydb.query("UPDATE payouts SET state = 'PAID', rail_reference = $2 WHERE payout_id = $1", [payoutId, railReference]);
  return { payoutId, accountId, token, railReference };
}

async function check(quiescent = false): Promise<CheckResult> {
  return checkInvariants(meshCheckTarget(t.mesh), { quiescent });
}

/** The invariants whose violations mention any of `ids`. */
async function namedFor(ids: string[], quiescent = false): Promise<string[]> {
  const r = await check(quiescent);
  return [...new Set(r.violations.filter((v) => ids.some((id) => JSON.stringify(v.row).includes(id))).map((v) => v.invariant))].sort();
}

describe("the audit on a live system", () => {
  it("a payment booked while the statement streams in, for an intent committed meanwhile, is no violation", async () => {
    const n = ++seq;
    const id = `po-live-${n}`;
    const accountId = `acc-live-${n}`;
    const auditor = poolFor(t.mesh.roleUrl("paydb", "auditor"));
    // The audit has begun reading the statement when the proxy admits a payout (intent and mark
    // committed) and the rail books it: the next page shows the payment.
    const statement: StatementSource = async function* pages() {
      await payout(id, accountId, "PROCESSING", 5n);
      await admit(id, id, accountId, 5n);
      yield [
        {
          railReference: rr(),
          clientReference: id,
          accountId,
          beneficiary: BEN,
          amountMinor: AMOUNT,
          currency: "EUR",
          status: "ACCEPTED",
          bookedAt: new Date(),
          sequence: 1n,
        },
      ];
    };
    try {
      const r = await runAudit(auditor, statement);
      expect(r.counts.railPayments).toBe(1);
      expect(r.violations.filter((v) => JSON.stringify(v.row).includes(id))).toEqual([]);
      // The same payment with no intent behind it is still named (the check above can fail).
      const ghost = `po-live-ghost-${n}`;
      const orphan: StatementSource = async function* pages() {
        yield [
          {
            railReference: rr(),
            clientReference: ghost,
            accountId,
            beneficiary: BEN,
            amountMinor: 77n,
            currency: "EUR",
            status: "ACCEPTED",
            bookedAt: new Date(),
            sequence: 1n,
          },
        ];
      };
      const named = (await runAudit(auditor, orphan)).violations.filter((v) => JSON.stringify(v.row).includes(ghost)).map((v) => v.invariant);
      expect(named).toEqual(expect.arrayContaining(["INTENT_FIRST"]));
    } finally {
      await auditor.end();
    }
  });
});

describe("a status the rail protocol does not document", () => {
  it("is named RAIL_STATUS_UNKNOWN (it may have moved money); the same payment REJECTED is not (negative control: the old reading)", async () => {
    const p = await cleanPaid();
    const auditor = poolFor(t.mesh.roleUrl("paydb", "auditor"));
    const second = (status: "UNKNOWN" | "REJECTED", reference: string): StatementSource =>
      async function* pages() {
        yield [
          {
            railReference: reference,
            clientReference: `${p.payoutId}:t9`,
            accountId: p.accountId,
            beneficiary: BEN,
            amountMinor: AMOUNT,
            currency: "EUR",
            status,
            bookedAt: new Date(),
            sequence: 1n,
          },
        ];
      };
    try {
      const unknownRef = rr();
      const named = (await runAudit(auditor, second("UNKNOWN", unknownRef))).violations.filter((v) => v.invariant === "RAIL_STATUS_UNKNOWN");
      expect(named.map((v) => JSON.stringify(v.row))).toEqual([expect.stringContaining(unknownRef)]);
      expect(JSON.stringify(named[0]!.row)).toContain(p.payoutId);
      const rejected = (await runAudit(auditor, second("REJECTED", rr()))).violations.filter((v) => v.invariant === "RAIL_STATUS_UNKNOWN");
      expect(rejected).toEqual([]);
    } finally {
      await auditor.end();
    }
  });
});

describe("the audit names every planted corruption", () => {
  it("a clean history (paid once, honestly) has no violation", async () => {
    const p = await cleanPaid();
    expect(await namedFor([p.payoutId, p.accountId], true)).toEqual([]);
  });

  it("a second payment of a payout under an unrelated reference (po.retry) is a double payment", async () => {
    const p = await cleanPaid();
    await railPays(`${p.payoutId}.retry`, p.accountId);
    expect(await namedFor([p.payoutId])).toEqual(expect.arrayContaining(["INV-02", "UNBOUND_REFERENCE", "INTENT_FIRST"]));
  });

  it("a second payment under another attempt reference of the same payout is a double payment", async () => {
    const p = await cleanPaid();
    await railPays(`${p.payoutId}:t9`, p.accountId);
    expect(await namedFor([p.payoutId])).toEqual(expect.arrayContaining(["INV-02", "INTENT_FIRST"]));
  });

  it("a payout of 1200 paid as 999,999,900 to another beneficiary is a payment mismatch", async () => {
    const n = ++seq;
    await payout(`po-planted-${n}`, `acc-planted-${n}`, "PROCESSING", 5n);
    await admit(`po-planted-${n}`, `po-planted-${n}`, `acc-planted-${n}`, 5n);
    await railPays(`po-planted-${n}`, `acc-planted-${n}`, rr(), { amount: 999_999_900n, beneficiary: "ben-attacker" });
    expect(await namedFor([`po-planted-${n}`])).toEqual(expect.arrayContaining(["PAYMENT_MISMATCH"]));
  });

  it("a payment that maps to no payout, by reference or by content, is unmapped", async () => {
    const ref = `ghost-${++seq}`;
    await railPays(ref, `acc-ghost-${seq}`, rr(), { amount: 31_337n });
    expect(await namedFor([ref])).toEqual(expect.arrayContaining(["UNMAPPED_PAYMENT", "INTENT_FIRST"]));
  });

  it("a payment whose reference maps to nothing and whose content matches two payouts is ambiguous", async () => {
    const n = ++seq;
    await payout(`po-twin-a-${n}`, `acc-twin-${n}`);
    await payout(`po-twin-b-${n}`, `acc-twin-${n}`);
    const ref = `ghost-twin-${n}`;
    await railPays(ref, `acc-twin-${n}`);
    expect(await namedFor([ref])).toEqual(expect.arrayContaining(["AMBIGUOUS_PAYMENT"]));
  });

  it("a PAID payout whose rail_reference the rail never booked is named", async () => {
    const n = ++seq;
    await payout(`po-planted-${n}`, `acc-planted-${n}`, "PAID", 3n, "rr_never_booked");
    expect(await namedFor([`po-planted-${n}`])).toEqual(expect.arrayContaining(["PAID_REFERENCE"]));
  });

  it("a FAILED payout that the rail paid is named", async () => {
    const p = await cleanPaid();
    await t.paydb.query("UPDATE payouts SET state = 'FAILED', rail_reference = NULL WHERE payout_id = $1", [p.payoutId]);
    expect(await namedFor([p.payoutId])).toEqual(expect.arrayContaining(["PAID_DESPITE_NOT_PAID"]));
  });

  it("a submission resolved NOT_PAID that the rail paid, with nothing recorded, is named twice over", async () => {
    const n = ++seq;
    const id = `po-planted-${n}`;
    await payout(id, `acc-planted-${n}`, "PROCESSING", 5n);
    await admit(id, id, `acc-planted-${n}`, 5n);
    await settle(id, "TIMEOUT");
    await resolve(id, "NOT_PAID");
    await t.paydb.query("UPDATE payouts SET state = 'FAILED' WHERE payout_id = $1", [id]);
    await railPays(id, `acc-planted-${n}`);
    expect(await namedFor([id])).toEqual(expect.arrayContaining(["PAID_DESPITE_NOT_PAID", "UNFLAGGED"]));
  });

  it("a late answer recorded on a resolved submission without flagging its payout is unflagged", async () => {
    const n = ++seq;
    const id = `po-planted-${n}`;
    await payout(id, `acc-planted-${n}`, "PROCESSING", 5n);
    await admit(id, id, `acc-planted-${n}`, 5n);
    await settle(id, "TIMEOUT");
    await resolve(id, "PAID");
    const ref = await railPays(id, `acc-planted-${n}`);
    await t.paydb.query("UPDATE rail_submissions SET late_answer_state = 'ACCEPTED', late_rail_reference = $2, late_answered_at = now() WHERE payout_id = $1", [
      id,
      ref,
    ]);
    await t.paydb.query("UPDATE payouts SET state = 'PAID', rail_reference = $2 WHERE payout_id = $1", [id, ref]);
    expect(await namedFor([id])).toEqual(["UNFLAGGED"]);
  });

  it("an intent bound to no payout is named", async () => {
    const n = ++seq;
    await admit(`po-orphan-${n}`, `po-orphan-${n}`, `acc-orphan-${n}`, 4n, { mark: true, binding: false, oneLive: true });
    expect(await namedFor([`po-orphan-${n}`])).toEqual(expect.arrayContaining(["INTENT_UNBOUND"]));
  });

  it("a rail payment with no intent (the rail paid around the proxy) is named", async () => {
    const n = ++seq;
    const id = `po-planted-${n}`;
    await payout(id, `acc-planted-${n}`, "PROCESSING", 5n);
    await railPays(id, `acc-planted-${n}`);
    expect(await namedFor([id])).toEqual(expect.arrayContaining(["INTENT_FIRST"]));
  });

  it("an admission out of order (a token below the mark, fencing off) is named", async () => {
    const p = await cleanPaid();
    const stale = `${p.payoutId}-stale`;
    await payout(stale, p.accountId, "PROCESSING", 3n);
    await admit(stale, stale, p.accountId, 3n, { mark: false, binding: true, oneLive: true });
    expect(await namedFor([stale])).toEqual(expect.arrayContaining(["FENCE_ADVANCED"]));
  });

  it("a mark that went backwards in the history is named", async () => {
    const p = await cleanPaid();
    await t.paydb.query("INSERT INTO rail_high_water_log (account_id, old_mark, new_mark) VALUES ($1, $2, 2)", [p.accountId, p.token.toString()]);
    expect(await namedFor([p.accountId])).toEqual(expect.arrayContaining(["MARK_MONOTONIC"]));
  });

  it("an intent recorded ACCEPTED that the rail never paid is named", async () => {
    const n = ++seq;
    const id = `po-planted-${n}`;
    await payout(id, `acc-planted-${n}`, "PROCESSING", 5n);
    await admit(id, id, `acc-planted-${n}`, 5n);
    await settle(id, "ACCEPTED", "rr_imaginary");
    expect(await namedFor([id])).toEqual(expect.arrayContaining(["OUTCOME_KNOWN"]));
  });

  it("after a drain, a payout still PROCESSING and an intent still FORWARDING are named; before it they are not", async () => {
    const n = ++seq;
    const id = `po-planted-${n}`;
    await payout(id, `acc-planted-${n}`, "PROCESSING", 5n);
    await admit(id, id, `acc-planted-${n}`, 5n);
    expect(await namedFor([id], false)).toEqual([]);
    expect(await namedFor([id], true)).toEqual(["OUTCOME_KNOWN", "PAYOUT_OPEN"]);
  });
});
