/**
 * `railfence payouts create` (the compiled CLI, a real process) against a real payouts process
 * when the answer does not come back: the answer lost to a reset connection (retried by the
 * library with the same key: one payout), no answer at all (exit 6, "outcome unknown", never
 * "refused"), and the CLI killed mid-call (the key was already printed, under --json too, and
 * repeating the command with it returns the one payout).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { eventually } from "../support/clients.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { claimed, holdPayoutInserts } from "../client/support.js";
import { ResetProxy } from "../client/reset-proxy.js";
import { countPayouts, createPaydb, dropPaydb, sql, startPayouts } from "../payouts/support.js";
import { BIN, railfence } from "./run-railfence.js";

let paydb: string;
let payouts: ServiceProcess;
let cwd: string;
const suffix = Date.now().toString(36);

beforeAll(async () => {
  paydb = await createPaydb();
  payouts = await startPayouts(paydb, { IDEMPOTENCY_LOCK_MS: "1500" });
  cwd = mkdtempSync(join(tmpdir(), "railfence-cli-outcomes-"));
});

afterAll(async () => {
  await payouts?.stop(5000);
  if (paydb) await dropPaydb(paydb);
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

const createArgs = (account: string) => ["payouts", "create", "--account", account, "--amount", "1050", "--currency", "EUR", "--beneficiary", "ben-cli"];
const keyState = async (key: string) => (await sql<{ state: string }>(paydb, "SELECT state FROM idempotency_keys WHERE idempotency_key = $1", [key]))[0]?.state;
/** Under --json, stderr's first line is the key, written before the call. */
const firstJsonLine = (stderr: string) => JSON.parse(stderr.slice(0, stderr.indexOf("\n"))) as { idempotencyKey: string };

describe("payouts create when the answer is lost", () => {
  it("the answer is lost to a reset connection after the server created the payout: the CLI retries with its key and prints the one payout", async () => {
    const account = `acc-cli-reset-${suffix}`;
    const proxy = await ResetProxy.start(payouts.ready!.port, account);
    try {
      const run = railfence([...createArgs(account), "--json", "--payouts", proxy.url], { cwd });
      await proxy.requestSeen;
      await eventually(async () => (await countPayouts(paydb, `account_id = '${account}'`)) === 1, "the server to create the payout");
      const key = (
        await sql<{ idempotency_key: string }>(
          paydb,
          "SELECT idempotency_key FROM idempotency_keys WHERE payout_id = (SELECT payout_id FROM payouts WHERE account_id = $1)",
          [account],
        )
      )[0]!.idempotency_key;
      await eventually(async () => (await keyState(key)) === "DONE", "the key to be DONE");
      proxy.reset();
      const r = await run;
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { idempotencyKey: string; replayed: boolean; payout: { accountId: string; payoutId: string } };
      expect(out).toMatchObject({ idempotencyKey: key, replayed: true, payout: { accountId: account } });
      // The server's retention of the key reaches the operator (24 h by default).
      const expiresAt = Date.parse((out as unknown as { idempotencyKeyExpiresAt: string }).idempotencyKeyExpiresAt);
      expect(expiresAt).toBeGreaterThan(Date.now() + 23 * 3_600_000);
      expect(firstJsonLine(r.stderr).idempotencyKey).toBe(key);
      expect(proxy.accepted).toBeGreaterThan(1);
      expect(await countPayouts(paydb, `account_id = '${account}'`)).toBe(1);
      // The operator's remedy for a key past its retention: look the payout up by the key.
      const found = await railfence(["payouts", "lookup", "--idempotency-key", key, "--json", "--payouts", payouts.url], { cwd });
      expect(found.code, found.stderr).toBe(0);
      expect(JSON.parse(found.stdout).payout.payoutId).toBe(out.payout.payoutId);
      const missing = await railfence(["payouts", "lookup", "--idempotency-key", `no-such-key-${suffix}`, "--payouts", payouts.url], { cwd });
      expect(missing.code).toBe(4);
      expect(missing.stderr).toContain("PAYOUT_NOT_FOUND");
    } finally {
      await proxy.close();
    }
  });

  it("no answer at all within --timeout-ms: exit 6, 'outcome unknown' (not refused), and the key to repeat it with", async () => {
    const account = `acc-cli-noanswer-${suffix}`;
    const proxy = await TcpProxy.start(payouts.ready!.port);
    proxy.blackhole();
    try {
      const r = await railfence([...createArgs(account), "--payouts", `http://127.0.0.1:${proxy.port}`, "--timeout-ms", "1500"], { cwd });
      expect(r.code, r.stderr).toBe(6);
      expect(r.stderr).toMatch(/^error: outcome unknown \(no answer; the request may have been carried out\): deadline_exceeded/m);
      expect(r.stderr).not.toMatch(/refused/);
      const key = /^idempotency-key: ([0-9a-f-]{36}) /.exec(r.stderr)![1]!;
      expect(r.stderr).toContain(`repeat the command with --idempotency-key ${key}`);
      const j = await railfence([...createArgs(account), "--payouts", `http://127.0.0.1:${proxy.port}`, "--timeout-ms", "1500", "--json"], { cwd });
      expect(j.code).toBe(6);
      expect(JSON.parse(j.stderr.slice(j.stderr.indexOf("\n") + 1)).error).toMatchObject({ outcome: "unknown", exitCode: 6, code: "deadline_exceeded" });
      // Repeated with the key against the service itself: one payout.
      const again = await railfence([...createArgs(account), "--payouts", payouts.url, "--idempotency-key", key, "--json"], { cwd });
      expect(again.code, again.stderr).toBe(0);
      expect(await countPayouts(paydb, `account_id = '${account}'`)).toBe(1);
    } finally {
      await proxy.close();
    }
  });
});

describe("payouts create prints its key before the call", () => {
  it.each([["--json"], ["text"]])(
    "%s: killed while the server holds the request, the key is already on stderr; repeating with it returns the one payout",
    async (mode) => {
      const account = `acc-cli-killed-${mode === "--json" ? "json" : "text"}-${suffix}`;
      const hold = await holdPayoutInserts(paydb);
      try {
        const env: Record<string, string> = {};
        for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("RAILFENCE_")) env[k] = v;
        const args = [...createArgs(account), "--payouts", payouts.url, "--timeout-ms", "60000", ...(mode === "--json" ? ["--json"] : [])];
        const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
        let stderr = "";
        let stdout = "";
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
        const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
        // The key the CLI printed before the call, and the server holding that very request.
        const keyOnStderr = () => {
          if (!stderr.includes("\n")) return undefined;
          return mode === "--json" ? firstJsonLine(stderr).idempotencyKey : /^idempotency-key: ([0-9a-f-]{36}) /.exec(stderr)?.[1];
        };
        const key = await eventually(async () => keyOnStderr(), "the CLI to print its key");
        await claimed(paydb, key);
        child.kill("SIGTERM");
        await exited;
        expect(stdout).toBe("");
        const printed = mode === "--json" ? firstJsonLine(stderr).idempotencyKey : /^idempotency-key: ([0-9a-f-]{36}) /.exec(stderr)?.[1];
        expect(printed).toBe(key);
        await hold.release();
        await eventually(async () => (await keyState(key)) === "DONE", "the orphaned request to commit");
        const again = await railfence([...createArgs(account), "--payouts", payouts.url, "--idempotency-key", key, "--json"], { cwd });
        expect(again.code, again.stderr).toBe(0);
        expect(JSON.parse(again.stdout)).toMatchObject({ idempotencyKey: key, replayed: true });
        expect(await countPayouts(paydb, `account_id = '${account}'`)).toBe(1);
      } finally {
        await hold.release();
      }
    },
  );
});
