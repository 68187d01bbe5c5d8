/**
 * paydb availability and role: the proxy fails closed when paydb is down (nothing forwarded),
 * and refuses a standby (ADR-007 failure iii). This file runs its own PostgreSQL so it can stop it.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { serviceUrl } from "../../tools/harness/database-roles.js";
import { PostgresServer } from "../../tools/harness/postgres.js";
import { ServiceProcess } from "../../tools/harness/service-process.js";
import { RetryInfoSchema } from "../../services/shared/gen/google/rpc/error_details_pb.js";
import { db, expectRejected, proxyClient, railBookings, railControl } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";

let pgServer: PostgresServer;
let mesh: Mesh;

beforeAll(async () => {
  pgServer = await PostgresServer.start();
  mesh = testMesh({ postgres: pgServer, proxies: 1 });
  await mesh.start();
});

afterAll(async () => {
  await mesh?.stop();
  await pgServer?.destroy();
});

describe("paydb down", () => {
  it("SubmitPayout answers unavailable with a retry hint and the rail sees nothing; it resumes when paydb is back", async () => {
    const proxy = proxyClient(mesh.proxies[0]!.url);
    const control = railControl(mesh);
    const request = { accountId: "acc-down", payoutId: "p-down-1", fencingToken: 5n, amount: { amountMinor: 100n, currency: "EUR" }, beneficiary: "b" };
    // The payout as its holder left it right before calling the proxy (while paydb was up).
    // This throwaway server runs with synchronous_commit off: the fence must reach the WAL
    // before the immediate stop below, as any commit does on a real paydb.
    const holder = await db(mesh.dbUrl("paydb"));
    await holder
      .query("SET synchronous_commit = on")
      .then(() => fencedFor(holder, request))
      .finally(() => holder.end());
    const callsBefore = (await control.getFaults({})).submitCalls;
    await pgServer.stop("immediate");
    try {
      const err = await expectRejected(
        proxy.submitPayout(request),
        Code.Unavailable,
        "PAYDB_UNAVAILABLE",
      );
      expect(err.findDetails(RetryInfoSchema)[0]?.retryDelay).toBeDefined();
      expect(err.metadata.get("retry-after")).toMatch(/^\d+$/);
      expect((await control.getFaults({})).submitCalls).toBe(callsBefore);
    } finally {
      await pgServer.startProcess();
    }
    // Nothing half-done was left behind, and the same payout can now be submitted.
    const paydb = await db(mesh.dbUrl("paydb"));
    const raildb = await db(mesh.databases.raildb);
    try {
      expect((await paydb.query("SELECT count(*)::int AS n FROM rail_submissions WHERE payout_id = 'p-down-1'")).rows[0].n).toBe(0);
      const res = await proxy.submitPayout(request);
      expect(res.submission?.railReference).toMatch(/^rr_/);
      expect(await railBookings(raildb, "p-down-1")).toBe(1);
    } finally {
      await paydb.end();
      await raildb.end();
    }
  });
});

describe("ADR-007 failure (iii): a standby", () => {
  it("rail-proxy refuses to start against a real streaming standby of paydb", async () => {
    const standby = await pgServer.makeStandby();
    try {
      const c = await db(standby.url("postgres"));
      expect((await c.query("SELECT pg_is_in_recovery() AS r")).rows[0].r).toBe(true);
      await c.end();
      const proxy = new ServiceProcess({ service: "rail-proxy", env: { ...mesh.proxyEnv(9), PAYDB_URL: serviceUrl(standby.url(mesh.dbUrl("paydb").split("/").pop()!), "rail-proxy") } });
      await expect(proxy.start()).rejects.toThrow(/standby/);
      expect(proxy.lastExit?.code).toBe(70);
    } finally {
      await standby.destroy();
    }
    // The primary came back from makeStandby's restart: the running proxy reconnects and works.
    await expect(
      proxyClient(mesh.proxies[0]!.url).getSubmission({ payoutId: "p-down-1" }).catch((e: unknown) => ConnectError.from(e)),
    ).resolves.not.toBeInstanceOf(ConnectError);
  });
});
