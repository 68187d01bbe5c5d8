/**
 * The library's certificates rotate as the servers' do: a client given `tlsFiles` re-reads them
 * when they change (a Kubernetes Secret update is an atomic swap of the mounted files) and its
 * next call presents the new certificate, with no restart and no new client object. A rotation
 * caught half-written (a new certificate beside the old key) keeps the old pair instead of
 * breaking every call. Against a real payouts process under mutual TLS, whose authorization tells
 * which identity a call presented: `client` may create payouts, `rail` is refused.
 */
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { equals } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Pki, type IdentityFiles } from "../../tools/harness/pki.js";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import {
  bigintReplacer,
  createRailfenceClient,
  PayoutSchema,
  payoutFromJson,
  payoutToJson,
  type RailfenceError,
  tlsFromFiles,
} from "../../clients/typescript/src/index.js";
import { eventually } from "../support/clients.js";
import { createPaydb, dropPaydb, startPayouts } from "../payouts/support.js";
import { letTimePass } from "../support/time.js";

let paydb: string;
let dir: string;
let pki: Pki;
let payouts: ServiceProcess;
let client: IdentityFiles;
let rail: IdentityFiles;

beforeAll(async () => {
  paydb = await createPaydb();
  dir = mkdtempSync(join(tmpdir(), "railfence-client-rotation-"));
  pki = await Pki.create(join(dir, "pki"));
  payouts = await startPayouts(paydb, { ...Pki.env(await pki.issue("payouts")), PAYOUTS_CLIENT_IDENTITIES: "client" }, "payouts-tls");
  payouts.opts.tls = true;
  client = await pki.issue("client");
  rail = await pki.issue("rail");
});

afterAll(async () => {
  await payouts?.stop(5000);
  if (paydb) await dropPaydb(paydb);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const body = (accountId: string) => ({ accountId, amount: { amountMinor: 4200n, currency: "EUR" }, beneficiary: "ben-rotation" });

/** A folder holding one identity's files under fixed names, as a mounted Secret does. */
function mounted(name: string, from: IdentityFiles): { certFile: string; keyFile: string; caFile: string } {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  copyFileSync(from.cert, join(d, "tls.crt"));
  copyFileSync(from.key, join(d, "tls.key"));
  copyFileSync(from.ca, join(d, "ca.crt"));
  return { certFile: join(d, "tls.crt"), keyFile: join(d, "tls.key"), caFile: join(d, "ca.crt") };
}

/** Replaces one mounted file atomically (write beside it, rename over it), as the kubelet's swap does. */
function swap(target: string, source: string): void {
  copyFileSync(source, `${target}.new`);
  renameSync(`${target}.new`, target);
}

/** "created" or the refusal's reason (or its outcome when the server never answered). */
async function tryCreate(rf: ReturnType<typeof createRailfenceClient>, accountId: string): Promise<string> {
  return rf.payouts.create(body(accountId)).then(
    () => "created",
    (e: unknown) => (e as RailfenceError).reason || `outcome:${(e as RailfenceError).outcome}`,
  );
}

const fast = { deadlineMs: 5000, timeoutMs: 3000, retry: { baseDelayMs: 20, maxDelayMs: 100 } };

describe("certificate rotation in @railfence/client", () => {
  it("a client on tlsFiles presents the new certificate after the files change; one that read them once does not (control)", async () => {
    const files = mounted("rotating", rail);
    const watching = createRailfenceClient({ payoutsUrl: payouts.url, tlsFiles: { ...files, reloadIntervalMs: 100 }, ...fast });
    const readOnce = createRailfenceClient({ payoutsUrl: payouts.url, tls: tlsFromFiles(files), ...fast });
    try {
      expect(await tryCreate(watching, "acct-rot-1")).toBe("PERMISSION_DENIED");
      expect(await tryCreate(readOnce, "acct-rot-1")).toBe("PERMISSION_DENIED");
      swap(files.keyFile, client.key);
      swap(files.certFile, client.cert);
      await eventually(async () => (await tryCreate(watching, "acct-rot-2")) === "created", "the rotated certificate is presented", 10_000);
      // Control: the same files, read once at start, still present the old identity.
      expect(await tryCreate(readOnce, "acct-rot-3")).toBe("PERMISSION_DENIED");
    } finally {
      watching.close();
      readOnce.close();
    }
  });

  it("a rotation caught half-written (new certificate, old key) keeps the old pair; the completed one is taken", async () => {
    const files = mounted("half", client);
    const rf = createRailfenceClient({ payoutsUrl: payouts.url, tlsFiles: { ...files, reloadIntervalMs: 100 }, ...fast });
    try {
      expect(await tryCreate(rf, "acct-half-1")).toBe("created");
      swap(files.certFile, rail.cert);
      // Control: the half-written pair itself cannot open a connection at all.
      const broken = createRailfenceClient({ payoutsUrl: payouts.url, tls: tlsFromFiles(files), ...fast });
      try {
        expect(await tryCreate(broken, "acct-half-x")).toBe("outcome:configuration");
      } finally {
        broken.close();
      }
      await letTimePass(500, "five polls of the files: the half-done change was seen and refused");
      expect(await tryCreate(rf, "acct-half-2")).toBe("created");
      swap(files.keyFile, rail.key);
      await eventually(async () => (await tryCreate(rf, "acct-half-3")) === "PERMISSION_DENIED", "the completed rotation is taken", 10_000);
    } finally {
      rf.close();
    }
  });
});

describe("payouts as JSON", () => {
  it("payoutToJson is safe for JSON.stringify (a bare payout is not: bigint) and payoutFromJson reads it back equal", async () => {
    const rf = createRailfenceClient({ payoutsUrl: payouts.url, tlsFiles: mounted("json", client), ...fast });
    try {
      const { payout } = await rf.payouts.create(body("acct-json"));
      expect(() => JSON.stringify(payout)).toThrow(/BigInt/);
      const text = JSON.stringify(payoutToJson(payout));
      expect(JSON.parse(text)).toMatchObject({ accountId: "acct-json", amount: { amountMinor: "4200", currency: "EUR" } });
      expect(equals(PayoutSchema, payoutFromJson(JSON.parse(text)), payout)).toBe(true);
      expect(JSON.parse(JSON.stringify({ payout }, bigintReplacer))).toMatchObject({ payout: { amount: { amountMinor: "4200" } } });
      // A misspelt field is refused, as the servers refuse it.
      expect(() => payoutFromJson({ ...JSON.parse(text), acountId: "x" })).toThrow(/acountId/);
    } finally {
      rf.close();
    }
  });
});
