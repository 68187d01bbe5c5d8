/**
 * The client library against real processes with faults injected while a CreatePayout is in
 * flight: paydb going down mid-request, the payouts process SIGKILLed mid-request, an answer
 * lost to a deadline, and the calling process itself killed and restarted. In every case the
 * intent ends with exactly one payout. The negative control shows the same fault with a new
 * key per attempt (what the library never does) creating the payout twice.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { claimed, countPayouts, holdPayoutInserts, library, payoutsOnOwnPostgres, refusals, sql, type PayoutsFixture } from "./support.js";
import { ClientPool, eventually } from "../support/clients.js";
import type { RailfenceError } from "../../clients/typescript/src/index.js";
import { ResetProxy } from "./reset-proxy.js";
import { letTimePass } from "../support/time.js";

let f: PayoutsFixture | undefined;
const closers: Array<() => void> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) c();
  await f?.stop();
  f = undefined;
});

const request = (accountId: string) => ({
  accountId,
  amount: { amountMinor: 1234n, currency: "EUR" },
  beneficiary: "ben-faults",
  clientReference: `ref-${accountId}`,
});

describe("exactly one payout per intent under faults", () => {
  it("paydb goes down mid-request: the intent is retried with its one key until paydb is back, and pays once", async () => {
    f = await payoutsOnOwnPostgres();
    const rf = library(f.svc.url);
    closers.push(() => rf.close());
    const intent = await rf.payouts.intent(request("acct-paydb-down"));
    const hold = await holdPayoutInserts(f.paydb);
    const result = intent.submit();
    await claimed(f.paydb, intent.key);
    await f.pg.stop("fast"); // the request's transaction dies with the server
    await letTimePass(2000, "paydb down for two seconds: attempts meanwhile fail");
    await f.pg.startProcess();
    await hold.release();

    const r = await result;
    expect(r.idempotencyKey).toBe(intent.key);
    expect(r.attempts).toBeGreaterThan(1);
    await eventually(async () => refusals(f!.svc, "IDEMPOTENCY_UNAVAILABLE").length >= 1, "the refusal's log line");
    expect(await countPayouts(f.paydb, "account_id = 'acct-paydb-down'")).toBe(1);
    expect(await sql(f.paydb, "SELECT state, payout_id FROM idempotency_keys WHERE idempotency_key = $1", [intent.key])).toEqual([
      { state: "DONE", payout_id: r.payout.payoutId },
    ]);
    // The payouts process lived through it (a transaction cut by the outage once crashed it).
    expect(f.svc.running).toBe(true);
  });

  it("the payouts process is SIGKILLed mid-request and restarted: retried through refused connections and the crashed attempt's lease, pays once", async () => {
    f = await payoutsOnOwnPostgres();
    const rf = library(f.svc.url);
    closers.push(() => rf.close());
    const intent = await rf.payouts.intent(request("acct-killed"));
    const hold = await holdPayoutInserts(f.paydb);
    const result = intent.submit();
    await claimed(f.paydb, intent.key);
    f.svc.kill("SIGKILL");
    await f.svc.waitExit();
    await hold.release();
    await letTimePass(500, "attempts meanwhile meet a refused connection");
    await f.svc.restart();

    const r = await result;
    // Either the killed process's statement still ran to its commit once the hold was released
    // (the one-statement CreatePayout, decision 071: the retry replays it) or it rolled back and
    // the retry created it; one payout either way.
    expect(typeof r.replayed).toBe("boolean");
    expect(r.attempts).toBeGreaterThan(1);
    expect(await countPayouts(f.paydb, "account_id = 'acct-killed'")).toBe(1);
  });

  it("the answer is lost (the attempt's deadline passes while the server commits): the retry gets the stored answer, idempotency-replayed", async () => {
    f = await payoutsOnOwnPostgres();
    const rf = library(f.svc.url, { timeoutMs: 300 });
    closers.push(() => rf.close());
    const intent = await rf.payouts.intent(request("acct-lost"));
    const hold = await holdPayoutInserts(f.paydb);
    const result = intent.submit();
    await claimed(f.paydb, intent.key);
    await letTimePass(900, "the first attempt's 300 ms deadline passes; retries meet IDEMPOTENCY_CONFLICT");
    await hold.release(); // the first attempt commits on the server, its answer goes nowhere

    const r = await result;
    expect(r.replayed).toBe(true);
    expect(r.attempts).toBeGreaterThan(1);
    await eventually(async () => refusals(f!.svc, "IDEMPOTENCY_CONFLICT").length >= 1, "the conflict's log line");
    expect(await countPayouts(f.paydb, "account_id = 'acct-lost'")).toBe(1);
  });

  it("the answer is lost to a reset connection (the server created the payout, the client reads ECONNRESET): retried with the same key, one payout", async () => {
    f = await payoutsOnOwnPostgres();
    const proxy = await ResetProxy.start(f.svc.ready!.port, "acct-reset");
    closers.push(() => void proxy.close());
    const rf = library(proxy.url);
    closers.push(() => rf.close());
    const intent = await rf.payouts.intent(request("acct-reset"));
    const result = intent.submit().then(
      (r) => ({ r, e: undefined }),
      (e: unknown) => ({ r: undefined, e: e as RailfenceError }),
    );
    await proxy.requestSeen;
    // The server runs the request to the end; only its answer is lost.
    await eventually(
      async () => (await sql(f!.paydb, "SELECT state FROM idempotency_keys WHERE idempotency_key = $1", [intent.key]))[0]?.state === "DONE",
      "the server to create the payout",
    );
    proxy.reset();

    const out = await result;
    expect(out.e, `${out.e?.codeName} ${out.e?.message} transient=${out.e?.transient} attempts=${out.e?.attempts}`).toBeUndefined();
    const r = out.r!;
    expect(r.idempotencyKey).toBe(intent.key);
    expect(r.replayed).toBe(true); // the retry got the stored answer of the lost one
    expect(r.attempts).toBeGreaterThan(1);
    expect(proxy.accepted).toBeGreaterThan(1);
    expect(await countPayouts(f.paydb, "account_id = 'acct-reset'")).toBe(1);
  });

  it("negative control: the same lost answer retried with a NEW key per attempt creates the payout twice", async () => {
    f = await payoutsOnOwnPostgres();
    const sessions = new ClientPool();
    closers.push(() => sessions.close());
    const raw = sessions.client(PayoutService, f.svc.url);
    const hold = await holdPayoutInserts(f.paydb);
    const [key1, key2] = [randomUUID(), randomUUID()];
    const first = raw.createPayout(request("acct-naive"), { headers: { "idempotency-key": key1 }, timeoutMs: 300 }).catch(() => undefined);
    await claimed(f.paydb, key1);
    await letTimePass(600, "the first call's 300 ms deadline passes");
    const second = raw.createPayout(request("acct-naive"), { headers: { "idempotency-key": key2 } });
    await claimed(f.paydb, key2); // the second call reached the server and waits behind the held insert
    await hold.release();
    await first;
    await second;
    expect(await countPayouts(f.paydb, "account_id = 'acct-naive'")).toBe(2);
  });

  it("the calling process dies mid-request: restarted with the same intent id, it finds its key in the key store and gets the one payout back", async () => {
    f = await payoutsOnOwnPostgres();
    const dir = mkdtempSync(join(tmpdir(), "railfence-intents-"));
    closers.push(() => rmSync(dir, { recursive: true, force: true }));
    const script = join(dir, "pay.mjs");
    const entry = join(projectRoot(), "dist", "clients", "typescript", "src", "index.js");
    writeFileSync(
      script,
      `import { createRailfenceClient, FileKeyStore } from ${JSON.stringify(entry)};
const [url, keys, id, mode] = process.argv.slice(2);
const rf = createRailfenceClient({ payoutsUrl: url, deadlineMs: 60000, ...(mode === "store" ? { keyStore: new FileKeyStore(keys) } : {}) });
const intent = await rf.payouts.intent({ accountId: "acct-restart", amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-restart", clientReference: "order-77" }, { id });
console.log(JSON.stringify({ event: "key", key: intent.key }));
const r = await intent.submit();
console.log(JSON.stringify({ event: "done", payoutId: r.payout.payoutId, replayed: r.replayed, key: r.idempotencyKey }));
rf.close();
`,
    );
    const run = (mode: "store" | "none") => {
      const child = spawn(process.execPath, [script, f!.svc.url, join(dir, "keys"), "order-77", mode], { stdio: ["ignore", "pipe", "inherit"] });
      const lines: Array<Record<string, unknown>> = [];
      let buffered = "";
      child.stdout!.on("data", (d: Buffer) => {
        buffered += d.toString();
        let nl;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          lines.push(JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>);
          buffered = buffered.slice(nl + 1);
        }
      });
      // "close": exited and every line read.
      const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
      return { child, lines, exited };
    };

    const hold = await holdPayoutInserts(f.paydb);
    const first = run("store");
    const key = (await eventually(async () => first.lines.find((l) => l.event === "key"), "the first process to mint its key")).key as string;
    await claimed(f.paydb, key);
    first.child.kill("SIGKILL"); // dies with its request inside the server
    await first.exited;
    await hold.release(); // the server finishes the dead process's request: the payout exists
    await eventually(async () => (await countPayouts(f!.paydb, "account_id = 'acct-restart'")) === 1, "the orphaned request to commit");

    const second = run("store");
    expect(await second.exited).toBe(0);
    const done = second.lines.find((l) => l.event === "done")!;
    expect(done.key).toBe(key);
    expect(done.replayed).toBe(true);
    expect(await countPayouts(f.paydb, "account_id = 'acct-restart'")).toBe(1);

    // Without the key store the restarted process mints a new key: a second payout.
    const amnesiac = run("none");
    expect(await amnesiac.exited).toBe(0);
    expect(amnesiac.lines.find((l) => l.event === "done")!.replayed).toBe(false);
    expect(await countPayouts(f.paydb, "account_id = 'acct-restart'")).toBe(2);
  });
});
