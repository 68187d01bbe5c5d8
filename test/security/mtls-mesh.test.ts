/**
 * Mutual TLS end to end on a small mesh (rail-stub, rail-proxy, lock, payouts, executor, every
 * hop TLS with its own identity), and per-method authorization on each server.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Pki, type IdentityFiles } from "../../tools/harness/pki.js";
import type { Mesh } from "../../tools/harness/mesh.js";
import { errorInfo } from "../../services/shared/domain/errors.js";
import { Health } from "../../services/shared/gen/grpc/health/v1/health_pb.js";
import { LockService } from "../../services/shared/gen/railfence/lock/v1/lock_pb.js";
import { PayoutService, PayoutState } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { RailService } from "../../services/shared/gen/railfence/rail/v1/rail_pb.js";
import { RailProxyService, ResolutionOutcome } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { db, eventually, expectRejected, metricValue, railBookings } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { railfence } from "../cli/run-railfence.js";
import { clientAs } from "./support.js";

let mesh: Mesh;
let otherCaDir: string;
let stranger: IdentityFiles;

beforeAll(async () => {
  mesh = testMesh({ tls: true, proxies: 1 });
  await mesh.start();
  await mesh.startLock();
  // CHF has a small daily limit for the per-identity budget test; every other currency the default.
  await mesh.startPayouts({ LIMIT_ACCOUNT_DAILY_AMOUNT: "CHF=1000,*=1000000000" });
  await mesh.addExecutor({ POLL_INTERVAL_MS: "50" });
  // A certificate for a legitimate-looking identity, from a CA the mesh does not trust.
  otherCaDir = mkdtempSync(join(tmpdir(), "railfence-other-ca-"));
  stranger = await (await Pki.create(otherCaDir, "not-railfence-ca")).issue("client");
});

afterAll(async () => {
  await mesh?.stop();
  if (otherCaDir) rmSync(otherCaDir, { recursive: true, force: true });
});

const as = (identity: Parameters<Mesh["identityFiles"]>[0]) => mesh.identityFiles(identity);
const money = { amountMinor: 1050n, currency: "EUR" };

async function payAndWait(key: string, accountId: string, identity: "client" | "operator" = "client") {
  const payouts = clientAs(PayoutService, mesh.payouts!.url, as(identity));
  const created = await payouts.createPayout({ accountId, amount: money, beneficiary: "ben-1", clientReference: key }, { headers: { "idempotency-key": key } });
  return created.payout!;
}

describe("mutual TLS mesh", () => {
  it("pays a payout through payouts -> executor -> lock -> rail-proxy -> rail, TLS on every hop", async () => {
    expect(mesh.payouts!.url).toMatch(/^https:\/\//);
    expect(mesh.proxies[0]!.url).toMatch(/^https:\/\//);
    const created = await payAndWait("e2e-1", "acc-e2e");
    const payouts = clientAs(PayoutService, mesh.payouts!.url, as("client"));
    const paid = await eventually(
      async () => {
        const p = (await payouts.getPayout({ payoutId: created.payoutId })).payout;
        return p?.state === PayoutState.PAID ? p : undefined;
      },
      "the payout to be PAID",
      30_000,
    );
    expect(paid.railReference).not.toBe("");
    const raildb = await db(mesh.dbUrl("raildb"));
    try {
      expect(await railBookings(raildb, created.payoutId)).toBe(1);
    } finally {
      await raildb.end();
    }
    // Every process logged that it serves (or calls) over mutual TLS.
    for (const p of [mesh.railStub, mesh.proxies[0]!, mesh.lock!, mesh.payouts!]) {
      expect(p.lines.some((l) => l.includes('"event":"transport"') && l.includes('"mode":"mtls"'))).toBe(true);
    }
  });

  it("refuses a client without a certificate at the TLS layer (no handler ever sees it)", async () => {
    const anon = clientAs(Health, mesh.payouts!.url, { ca: as("client").ca });
    const err = await anon.check({}).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err, "a certificate-less call must fail").toBeDefined();
    expect(errorInfo(err!)).toBeUndefined();
    expect(err!.message).toMatch(/certificate/i);
  });

  it("refuses a certificate issued by another CA, even for a known identity", async () => {
    const impostor = clientAs(PayoutService, mesh.payouts!.url, { ...stranger, ca: as("client").ca });
    const err = await impostor
      .createPayout(
        { accountId: "acc-impostor", amount: money, beneficiary: "ben-1", clientReference: "impostor-1" },
        { headers: { "idempotency-key": "impostor-1" } },
      )
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(err, "a foreign certificate must be refused").toBeDefined();
    // No railfence ErrorInfo: the refusal came from the TLS layer, not from a handler.
    expect(errorInfo(err!)).toBeUndefined();
    const paydb = await db(mesh.dbUrl("paydb"));
    try {
      const { rowCount } = await paydb.query("SELECT 1 FROM payouts WHERE account_id = $1", ["acc-impostor"]);
      expect(rowCount).toBe(0);
    } finally {
      await paydb.end();
    }
  });

  it("lets the executor submit but not resolve; the operator may resolve; denials are counted and change nothing", async () => {
    const created = await payAndWait("resolve-1", "acc-resolve");
    const paydb = await db(mesh.dbUrl("paydb"));
    try {
      const row = async () =>
        (await paydb.query("SELECT * FROM rail_submissions WHERE payout_id = $1", [created.payoutId])).rows[0] as Record<string, unknown> | undefined;
      const before = await eventually(
        async () => {
          const r = await row();
          return r && r.state !== "FORWARDING" ? r : undefined;
        },
        "the submission to be decided",
        30_000,
      );
      const proxyUrl = mesh.proxies[0]!.url;
      const metricsPort = mesh.proxies[0]!.ready!.metricsPort;
      const labels = 'rpc_method="ResolveSubmission"';
      const deniedBefore = (await metricValue(metricsPort, "railfence_rpc_permission_denied_total", labels)) ?? 0;

      const executor = clientAs(RailProxyService, proxyUrl, as("executor"));
      const denied = await expectRejected(
        executor.resolveSubmission({ payoutId: created.payoutId, outcome: ResolutionOutcome.NOT_PAID, actor: "executor", note: "should be refused" }),
        Code.PermissionDenied,
        "PERMISSION_DENIED",
      );
      expect(errorInfo(denied)?.metadata).toEqual({ identity: "executor", method: "railfence.railproxy.v1.RailProxyService/ResolveSubmission" });
      expect(await metricValue(metricsPort, "railfence_rpc_permission_denied_total", labels)).toBe(deniedBefore + 1);
      expect(await row()).toEqual(before);
      // The log line comes through a pipe and may trail the refusal the client already holds.
      await eventually(
        async () => mesh.proxies[0]!.lines.some((l) => l.includes('"event":"permission_denied"') && l.includes("ResolveSubmission")),
        "a permission_denied log line",
      );

      // The executor's own method passes authorization: the handler judges the stale token (it is
      // refused by the fence or the payout binding, never by authorization).
      const submit = await executor
        .submitPayout({ accountId: "acc-resolve", payoutId: created.payoutId, fencingToken: 1n, amount: money, beneficiary: "ben-1" })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(submit, "a stale token for a paid payout must be refused").toBeDefined();
      expect(["FENCED_OUT", "PAYOUT_NOT_PAYABLE", "PAYOUT_FENCE_MISMATCH", "DUPLICATE_SUBMISSION", "TOKEN_SIGNATURE_INVALID"]).toContain(
        errorInfo(submit!)?.reason,
      );

      // The operator passes authorization: the handler itself answers (here: the submission was
      // decided, so it is not ambiguous and cannot be resolved).
      const operator = clientAs(RailProxyService, proxyUrl, as("operator"));
      await expectRejected(
        operator.resolveSubmission({ payoutId: created.payoutId, outcome: ResolutionOutcome.NOT_PAID, actor: "operator", note: "test" }),
        Code.FailedPrecondition,
        "NOT_AMBIGUOUS",
      );
      // Reads are open to the operator.
      const got = await operator.getSubmission({ payoutId: created.payoutId });
      expect(got).toBeDefined();
    } finally {
      await paydb.end();
    }
  });

  it("refuses the client identity on the lock service and the rail-proxy", async () => {
    const lock = clientAs(LockService, mesh.lock!.url, as("client"));
    await expectRejected(lock.acquire({ key: "acc-x", owner: "client", ttlMs: 1000, waitMs: 0 }), Code.PermissionDenied, "PERMISSION_DENIED");
    await expectRejected(lock.inspect({ key: "acc-x" }), Code.PermissionDenied, "PERMISSION_DENIED");
    const proxy = clientAs(RailProxyService, mesh.proxies[0]!.url, as("client"));
    await expectRejected(proxy.getSubmission({ payoutId: "p-1" }), Code.PermissionDenied, "PERMISSION_DENIED");
    await expectRejected(proxy.listUnresolved({}), Code.PermissionDenied, "PERMISSION_DENIED");
    // The operator may inspect locks; health is open to any verified caller.
    await clientAs(LockService, mesh.lock!.url, as("operator")).inspect({ key: "acc-x" });
    expect((await clientAs(Health, mesh.lock!.url, as("client")).check({})).status).toBe(1);
  });

  it("has the rail refuse any caller but rail-proxy, even one holding the bearer credential", async () => {
    const bearer = { headers: { authorization: `Bearer ${mesh.credential}` } };
    const asOperator = clientAs(RailService, mesh.railStub.url, as("operator"));
    await expectRejected(asOperator.listPayments({ pageSize: 1 }, bearer), Code.PermissionDenied, "PERMISSION_DENIED");
    const asExecutor = clientAs(RailService, mesh.railStub.url, as("executor"));
    await expectRejected(asExecutor.listPayments({ pageSize: 1 }, bearer), Code.PermissionDenied, "PERMISSION_DENIED");
    // rail-proxy's identity with the credential is served; without the credential it is still refused.
    const asProxy = clientAs(RailService, mesh.railStub.url, as("rail-proxy"));
    await asProxy.listPayments({ pageSize: 1 }, bearer);
    await expectRejected(asProxy.listPayments({ pageSize: 1 }), Code.Unauthenticated, "RAIL_CREDENTIAL_INVALID");
  });

  it("scopes idempotency keys per certificate identity", async () => {
    const key = "shared-key-1";
    const byClient = await payAndWait(key, "acc-scope-a", "client");
    // Same key, different body, different identity: a new payout, not a conflict or a replay.
    const byOperator = await payAndWait(key, "acc-scope-b", "operator");
    expect(byOperator.payoutId).not.toBe(byClient.payoutId);
    expect(byOperator.accountId).toBe("acc-scope-b");
    // Each identity's replay returns its own answer.
    expect((await payAndWait(key, "acc-scope-a", "client")).payoutId).toBe(byClient.payoutId);
    // And one identity cannot reuse the key with another body (its own scope still guards it).
    const payouts = clientAs(PayoutService, mesh.payouts!.url, as("client"));
    const conflict = await payouts
      .createPayout({ accountId: "acc-scope-b", amount: money, beneficiary: "ben-1", clientReference: key }, { headers: { "idempotency-key": key } })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(conflict?.code).toBeDefined();
  });

  it("scopes LookupPayout per certificate identity: by key and by reference, each identity finds only its own", async () => {
    const key = "lookup-key-1";
    const byClient = await payAndWait(key, "acc-lookup-a", "client");
    const client = clientAs(PayoutService, mesh.payouts!.url, as("client"));
    const operator = clientAs(PayoutService, mesh.payouts!.url, as("operator"));
    expect((await client.lookupPayout({ by: { case: "idempotencyKey", value: key } })).payout!.payoutId).toBe(byClient.payoutId);
    expect((await client.lookupPayout({ by: { case: "clientReference", value: key } })).payout!.payoutId).toBe(byClient.payoutId);
    for (const by of [
      { case: "idempotencyKey" as const, value: key },
      { case: "clientReference" as const, value: key },
    ]) {
      const err = await operator.lookupPayout({ by }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.NotFound);
      expect(errorInfo(err!)?.reason).toBe("PAYOUT_NOT_FOUND");
    }
  });

  it("keeps a daily budget per certificate identity on one account: one identity's spending neither uses up nor shows in the other's", async () => {
    const pay = async (identity: "client" | "operator", amountMinor: bigint) => {
      const payouts = clientAs(PayoutService, mesh.payouts!.url, as(identity));
      return payouts
        .createPayout(
          { accountId: "acc-limit-shared", amount: { amountMinor, currency: "CHF" }, beneficiary: "ben-1" },
          { headers: { "idempotency-key": `limit-${identity}-${amountMinor}-${Math.random()}` } },
        )
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
    };
    expect(await pay("client", 900n)).toBeUndefined();
    expect(await pay("operator", 1000n)).toBeUndefined(); // the client's 900 is not the operator's
    const operatorRefused = await pay("operator", 1n);
    expect(errorInfo(operatorRefused!)?.reason).toBe("ACCOUNT_DAILY_LIMIT_EXCEEDED");
    expect(errorInfo(operatorRefused!)?.metadata.used).toBe("1000");
    const clientRefused = await pay("client", 200n);
    expect(errorInfo(clientRefused!)?.metadata.used).toBe("900");
  });

  it("lets the CLI call as the operator with the certificate named in endpoints.json, and fails without it", async () => {
    const created = await payAndWait("cli-1", "acc-cli", "operator");
    const cwd = join(otherCaDir, "cli");
    mkdirSync(join(cwd, ".railfence"), { recursive: true });
    const op = as("operator");
    const endpoints = { payouts: mesh.payouts!.url, railProxy: [mesh.proxies[0]!.url], lock: mesh.lock!.url };
    writeFileSync(join(cwd, ".railfence", "endpoints.json"), JSON.stringify({ ...endpoints, tls: { ca: op.ca, cert: op.cert, key: op.key } }));
    const ok = await railfence(["payouts", "get", created.payoutId, "--json"], { cwd });
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ payout: { payoutId: created.payoutId } });
    // The same file without the certificate: the TLS session is refused, the CLI reports failure.
    writeFileSync(join(cwd, ".railfence", "endpoints.json"), JSON.stringify(endpoints));
    const refused = await railfence(["payouts", "get", created.payoutId, "--json"], { cwd });
    expect(refused.code).not.toBe(0);
  });
});
