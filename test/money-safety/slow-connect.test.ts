/**
 * A rail whose TCP handshake is slow (its accept queue full: SYNs dropped until it makes room,
 * the client retransmitting them 1, 3, 7 s after the first) is where the transport can send a
 * request long after the proxy gave up on it. Node's HTTP/2 client queues a request on a session
 * still connecting and writes it, HEADERS and DATA with END_STREAM, when the socket connects,
 * even after the call's deadline closed the stream: after the row was recorded TIMEOUT and
 * resolved NOT_PAID, a rail that books complete requests books it.
 *
 * - Guarded (every guard on): the rail call waits for a connected session before the send gate,
 *   at most the pre-forward budget; past it the connection attempt is reset and the submission
 *   is NOT_FORWARDED. Released afterwards, the rail never sees that request: the relay relays
 *   only the next call's connection, and the payout is booked zero times.
 * - Negative control (RAIL_PROXY_DISABLED_GUARDS=connected-session, the transport as it was):
 *   the request is queued on the connecting session, the deadline passes (TIMEOUT), an operator
 *   resolves it NOT_PAID, and once the rail accepts the connection the request leaves the proxy
 *   (seen in the bytes the relay carries): a rail that books complete requests pays it after the
 *   NOT_PAID verdict. (This stub drops a stream the client reset before it answered; the relay's
 *   view of what left the proxy does not depend on that.)
 */
import { ConnectError } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fencedByExecutor } from "../support/fenced-payout.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { ResolutionOutcome } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { eventually, proxyClient } from "../support/clients.js";
import { startSlowAcceptRelay, type SlowAcceptRelay } from "../support/slow-accept-relay.js";
import { testMesh } from "../support/test-mesh.js";
import { insertPayouts, poolFor } from "../executor/support.js";
import { quietFor } from "../support/time.js";

// A budget of 1.5 s: room for an admission and a connect on a loaded machine, and still within
// the SYN retransmission schedule (1, 3, 7 s) the relay's full queue imposes on the first call.
const TIMING = { RAIL_DEADLINE_MS: "1000", AMBIGUITY_MARGIN_MS: "3000", ADMISSION_TIMEOUT_MS: "2000", RAIL_FORWARD_BUDGET_MS: "1500" };

let mesh: Mesh;
let paydb: pg.Pool;
let raildb: pg.Pool;
const relays: SlowAcceptRelay[] = [];

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, proxyEnv: TIMING });
  await mesh.start();
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
});

afterAll(async () => {
  for (const r of relays) await r.stop();
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
});

/** A rail-proxy replica of its own whose rail is behind a relay that accepts nothing yet. */
async function proxyBehindSlowRail(name: string, env: Record<string, string> = {}): Promise<{ proxy: ServiceProcess; relay: SlowAcceptRelay }> {
  const railUrl = new URL(mesh.railStub.url);
  const relay = await startSlowAcceptRelay(Number(railUrl.port), "po-slow-[a-z-]+");
  relays.push(relay);
  const proxy = await mesh.startSpareProxy(name, { ...TIMING, RAIL_URL: `${railUrl.protocol}//127.0.0.1:${relay.port}`, ...env });
  return { proxy, relay };
}

async function fencedPayout(payoutId: string, accountId: string, token: bigint): Promise<void> {
  await insertPayouts(paydb, [{ payoutId, accountId, amountMinor: 3100n, beneficiary: "ben-slow" }]);
  await fencedByExecutor(paydb, payoutId, token);
}

function submit(proxy: ServiceProcess, payoutId: string, accountId: string, token: bigint) {
  return proxyClient(proxy.url)
    .submitPayout({ accountId, payoutId, fencingToken: token, amount: { amountMinor: 3100n, currency: "EUR" }, beneficiary: "ben-slow" }, { timeoutMs: 30_000 })
    .then(
      (ok) => ({ ok, err: undefined }),
      (err: unknown) => ({ ok: undefined, err: ConnectError.from(err) }),
    );
}

async function submissionState(payoutId: string): Promise<string | undefined> {
  const { rows } = await paydb.query<{ state: string }>("SELECT state FROM rail_submissions WHERE payout_id = $1", [payoutId]);
  return rows[0]?.state;
}

async function bookings(payoutId: string): Promise<number> {
  const { rows } = await raildb.query<{ n: number }>("SELECT count(*)::int AS n FROM payments WHERE client_reference = $1", [payoutId]);
  return rows[0]!.n;
}

describe("a rail slow to accept the connection", () => {
  it("guarded: no connection within the budget is NOT_FORWARDED, and nothing of that request ever reaches the rail", async () => {
    const { proxy, relay } = await proxyBehindSlowRail("rail-proxy-slow-guarded");
    const payoutId = "po-slow-guarded";
    await fencedPayout(payoutId, "acc-slow-guarded", 7n);
    const started = Date.now();
    const first = await submit(proxy, payoutId, "acc-slow-guarded", 7n);
    expect(errorReason(first.err), first.err?.message).toBe("NOT_FORWARDED");
    expect(await submissionState(payoutId)).toBe("NOT_FORWARDED");

    // The rail makes room: a later call connects and is booked (on a loaded machine the first
    // try may itself miss the budget: NOT_FORWARDED, and the next one goes)...
    await relay.release();
    const nextIds: string[] = [];
    await eventually(
      async () => {
        const nextId = `po-slow-guarded-next-${"abcdefghijklmnopqrstuvwxyz"[nextIds.length % 26]}`;
        nextIds.push(nextId);
        await fencedPayout(nextId, `acc-${nextId}`, 3n);
        const next = await submit(proxy, nextId, `acc-${nextId}`, 3n);
        return next.ok && (await bookings(nextId)) === 1;
      },
      "a later call to connect and be booked",
      30_000,
    );
    // ...and the first request never leaves: its connection attempt was aborted, so no SYN of it
    // is retransmitted (the kernel would have retried 1, 3 and 7 s after the first).
    await quietFor(started + 8000 - Date.now(), "the kernel's SYN retransmissions (1, 3 and 7 s): none may carry it");
    expect(await bookings(payoutId)).toBe(0);
    expect(relay.seen, "what left the proxy: the later calls only").not.toContain(payoutId);
    expect(
      relay.seen.every((id) => nextIds.includes(id)),
      relay.seen.join(","),
    ).toBe(true);
  }, 60_000);

  it("negative control (connected-session removed): the queued request leaves after TIMEOUT and NOT_PAID, and the rail books it", async () => {
    const { proxy, relay } = await proxyBehindSlowRail("rail-proxy-slow-unguarded", { RAIL_PROXY_DISABLED_GUARDS: "connected-session" });
    const payoutId = "po-slow-unguarded";
    await fencedPayout(payoutId, "acc-slow-unguarded", 7n);
    const first = await submit(proxy, payoutId, "acc-slow-unguarded", 7n);
    expect(errorReason(first.err), first.err?.message).toBe("RAIL_AMBIGUOUS");
    expect(await submissionState(payoutId)).toBe("TIMEOUT");
    // An operator (or the reconciler, once its window passed) closes it NOT_PAID: the statement is empty.
    await proxyClient(mesh.proxies[0]!.url).resolveSubmission({
      payoutId,
      outcome: ResolutionOutcome.NOT_PAID,
      actor: "operator:test",
      note: "not on the statement (test: forced before the floor)",
      force: true,
    });
    expect(await submissionState(payoutId)).toBe("RESOLVED_NOT_PAID");
    expect(await bookings(payoutId)).toBe(0);
    await relay.release();
    // The SYN retransmitted after the release connects, and Node flushes the queued request:
    // it leaves the proxy after NOT_PAID. (This stub drops a stream its client reset before it
    // answered; a rail that books any complete request would book it.)
    await eventually(async () => relay.seen.includes(payoutId), "the queued request to leave the proxy after NOT_PAID", 20_000);
  }, 60_000);
});
