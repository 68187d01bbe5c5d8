/**
 * The compiled CLI against a real mesh (PostgreSQL, rail-stub, two rail-proxy replicas):
 * reading the intent ledger, listing and resolving an ambiguous submission made by a real
 * lost rail answer, and the exit codes of the error paths.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { db, expectRejected, FaultKind, proxyClient, railBookings, railControl } from "../support/clients.js";
import { fencedFor } from "../support/fenced-payout.js";
import { testMesh } from "../support/test-mesh.js";
import { railfence } from "./run-railfence.js";

let mesh: Mesh;
let paydb: pg.Client;
let raildb: pg.Client;
let cwd: string;
let proxies: string;
let deadUrl: string;
const suffix = Date.now().toString(36);
const OK = `p-ok-${suffix}`;
// One ambiguous submission per test that needs one, so no test depends on another's effects.
const AMB_LISTED = `p-amb-${suffix}-listed`;
const AMB_REFUSED = `p-amb-${suffix}-refused`;
const AMB_RESOLVED = `p-amb-${suffix}-resolved`;

/** A port nobody listens on: bind it, note it, release it. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

const cli = (args: string[], input?: string) => railfence(args, { cwd, input });
const submissionRow = async (payoutId: string) =>
  (await paydb.query("SELECT state, resolution_actor, resolution_note, rail_reference FROM rail_submissions WHERE payout_id = $1", [payoutId])).rows[0];

beforeAll(async () => {
  // A short rail deadline so the lost answer becomes TIMEOUT quickly.
  mesh = testMesh({ proxies: 2, proxyEnv: { RAIL_DEADLINE_MS: "1000" } });
  await mesh.start();
  paydb = await db(mesh.dbUrl("paydb"));
  raildb = await db(mesh.databases.raildb);
  cwd = mkdtempSync(join(tmpdir(), "railfence-cli-"));
  proxies = mesh.proxies.map((p) => p.url).join(",");
  deadUrl = `http://127.0.0.1:${await deadPort()}`;

  // Submitted as the payouts' holder submits them: each payout fenced for its request.
  const proxy = proxyClient(mesh.proxies[0]!.url);
  const accepted = await proxy.submitPayout(
    await fencedFor(paydb, {
      accountId: `acc-ok-${suffix}`,
      payoutId: OK,
      fencingToken: 1n,
      amount: { amountMinor: 1050n, currency: "EUR" },
      beneficiary: "ben-001",
    }),
  );
  expect(accepted.submission?.railReference).not.toBe("");

  // The rail books each payment, then its answer is lost: the proxy records TIMEOUT (ambiguous).
  await railControl(mesh).setFaults({ rules: [{ kind: FaultKind.LAND_THEN_LOSE_ANSWER, latencyMs: 0, count: 3, clientReferencePrefix: `p-amb-${suffix}` }] });
  const ambiguous = [AMB_LISTED, AMB_REFUSED, AMB_RESOLVED].map((payoutId, i) => ({
    accountId: `acc-amb-${suffix}-${i}`,
    payoutId,
    fencingToken: 1n,
    amount: { amountMinor: 700n, currency: "USD" },
    beneficiary: "ben-002",
  }));
  for (const req of ambiguous) await fencedFor(paydb, req);
  await Promise.all(ambiguous.map((req) => expectRejected(proxyClient(mesh.proxies[1]!.url).submitPayout(req), Code.Aborted, "RAIL_AMBIGUOUS")));
  await railControl(mesh).setFaults({ rules: [] });
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

describe("submissions get", () => {
  it("--json prints the ledger row as one JSON object", async () => {
    const r = await cli(["submissions", "get", OK, "--json", "--rail-proxy", proxies]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.submission).toMatchObject({
      payoutId: OK,
      state: "SUBMISSION_STATE_ACCEPTED",
      fencingToken: "1",
      amount: { amountMinor: "1050", currency: "EUR" },
      ambiguous: false,
      replicaId: "rail-proxy-1",
    });
    expect(j.submission.railReference).not.toBe("");
  });

  it("prints a human view by default", async () => {
    const r = await cli(["submissions", "get", OK, "--rail-proxy", proxies]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^state\s+ACCEPTED$/m);
    expect(r.stdout).toMatch(/^amount\s+10\.50 EUR$/m);
  });

  it("moves past an unreachable replica to the next one", async () => {
    const r = await cli(["submissions", "get", OK, "--json", "--rail-proxy", deadUrl, "--rail-proxy", mesh.proxies[1]!.url]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).submission.payoutId).toBe(OK);
  });

  it("an unknown payout exits 4 with SUBMISSION_NOT_FOUND on stderr", async () => {
    const r = await cli(["submissions", "get", `p-never-${suffix}`, "--rail-proxy", proxies]);
    expect(r.code).toBe(4);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("error: not_found SUBMISSION_NOT_FOUND");
    expect(r.stderr).toContain("hint: ");
    const j = await cli(["submissions", "get", `p-never-${suffix}`, "--rail-proxy", proxies, "--json"]);
    expect(j.code).toBe(4);
    expect(JSON.parse(j.stderr).error).toMatchObject({ code: "not_found", reason: "SUBMISSION_NOT_FOUND" });
  });

  it("an id the server refuses exits 1 with the field's reason", async () => {
    const r = await cli(["submissions", "get", "bad id!", "--rail-proxy", proxies]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("invalid_argument FIELD_INVALID");
    expect(r.stderr).toContain("field=payout_id");
  });

  it("an unreachable endpoint exits 3", async () => {
    const r = await cli(["submissions", "get", OK, "--rail-proxy", deadUrl]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("error: unavailable");
    expect(r.stderr).toContain(deadUrl);
  });

  it("reads .railfence/endpoints.json, and env overrides it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "railfence-cli-file-"));
    try {
      mkdirSync(join(dir, ".railfence"));
      writeFileSync(join(dir, ".railfence", "endpoints.json"), JSON.stringify({ railProxy: mesh.proxies.map((p) => p.url), paydb: mesh.dbUrl("paydb") }));
      const fromFile = await railfence(["submissions", "get", OK, "--json"], { cwd: dir });
      expect(fromFile.code).toBe(0);
      const overridden = await railfence(["submissions", "get", OK], { cwd: dir, env: { RAILFENCE_RAIL_PROXY_URL: deadUrl } });
      expect(overridden.code).toBe(3);
      const shown = await railfence(["endpoints", "--json"], { cwd: dir, env: { RAILFENCE_RAIL_PROXY_URL: deadUrl } });
      expect(JSON.parse(shown.stdout).railProxy).toEqual({ url: [deadUrl], source: "env" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("an ambiguous submission, listed and resolved by an operator", () => {
  it("is listed by `submissions unresolved --json`, and the clear one is not", async () => {
    const r = await cli(["submissions", "unresolved", "--json", "--rail-proxy", proxies]);
    expect(r.code).toBe(0);
    const ids = (JSON.parse(r.stdout).submissions as Array<{ payoutId: string; ambiguous: boolean; state: string }>).map((s) => s.payoutId);
    expect(ids).toContain(AMB_LISTED);
    expect(ids).not.toContain(OK);
    const human = await cli(["submissions", "unresolved", "--rail-proxy", proxies]);
    expect(human.stdout).toMatch(new RegExp(`^${AMB_LISTED}\\s+acc-amb-${suffix}-0\\s+TIMEOUT\\s+7\\.00 USD`, "m"));
  });

  it("refusals change nothing: a declined confirmation (exit 2), a missing --actor or --rail-reference (exit 2)", async () => {
    // `submissions resolve AMB_REFUSED --outcome PAID <options> --rail-proxy <proxies>`
    const resolvePaid = (...options: string[]) => ["submissions", "resolve", AMB_REFUSED, "--outcome", "PAID", ...options, "--rail-proxy", proxies];
    const declined = await cli(resolvePaid("--actor", "ops:alice", "--note", "statement line 1", "--rail-reference", "rr_1"), "n\n");
    expect(declined.code).toBe(2);
    expect(declined.stderr).toContain(`About to resolve payout ${AMB_REFUSED} as PAID`);
    expect(declined.stderr).toContain("nothing was changed");
    const noStdin = await cli(resolvePaid("--actor", "ops:alice", "--note", "x", "--rail-reference", "rr_1"));
    expect(noStdin.code).toBe(2);
    const noActor = await cli(resolvePaid("--note", "x", "--yes"));
    expect(noActor.code).toBe(2);
    expect(noActor.stderr).toContain("--actor is required");
    const noReference = await cli(resolvePaid("--actor", "ops:alice", "--note", "x", "--yes"));
    expect(noReference.code).toBe(2);
    expect(noReference.stderr).toContain("--outcome PAID needs --rail-reference");
    expect((await submissionRow(AMB_REFUSED))?.state).toBe("TIMEOUT");
  });

  it("a confirmed resolve records the verdict; a second resolve is refused with NOT_AMBIGUOUS", async () => {
    // The lost answer really moved money: the rail's own ledger is the evidence for PAID.
    expect(await railBookings(raildb, AMB_RESOLVED)).toBe(1);
    const { rows: booked } = await raildb.query<{ rail_reference: string }>("SELECT rail_reference FROM payments WHERE client_reference = $1", [AMB_RESOLVED]);
    const r = await cli(
      [
        "submissions",
        "resolve",
        AMB_RESOLVED,
        "--outcome",
        "PAID",
        "--actor",
        "ops:alice",
        "--note",
        "on statement",
        "--rail-reference",
        booked[0]!.rail_reference,
        "--rail-proxy",
        proxies,
      ],
      "yes\n",
    );
    expect(r.stderr).toContain("Continue? [y/N]");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`resolved ${AMB_RESOLVED} as PAID`);
    expect(await submissionRow(AMB_RESOLVED)).toMatchObject({
      state: "RESOLVED_PAID",
      resolution_actor: "ops:alice",
      resolution_note: "on statement",
      rail_reference: booked[0]!.rail_reference,
    });

    const after = await cli(["submissions", "unresolved", "--json", "--rail-proxy", proxies]);
    expect((JSON.parse(after.stdout).submissions as Array<{ payoutId: string }>).map((s) => s.payoutId)).not.toContain(AMB_RESOLVED);

    const again = await cli([
      "submissions",
      "resolve",
      AMB_RESOLVED,
      "--outcome",
      "NOT_PAID",
      "--actor",
      "ops:bob",
      "--note",
      "x",
      "--yes",
      "--json",
      "--rail-proxy",
      proxies,
    ]);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error).toMatchObject({ code: "failed_precondition", reason: "NOT_AMBIGUOUS" });
    expect((await submissionRow(AMB_RESOLVED))?.state).toBe("RESOLVED_PAID");
    // Resolving never touches the rail.
    expect(await railBookings(raildb, AMB_RESOLVED)).toBe(1);

    const shown = await cli(["submissions", "get", AMB_RESOLVED, "--json", "--rail-proxy", proxies]);
    expect(JSON.parse(shown.stdout).submission).toMatchObject({
      state: "SUBMISSION_STATE_RESOLVED_PAID",
      ambiguous: false,
      resolution: { outcome: "RESOLUTION_OUTCOME_PAID", actor: "ops:alice", previousState: "SUBMISSION_STATE_TIMEOUT" },
    });
  });

  it("resolving an unknown payout with --yes exits 4", async () => {
    const r = await cli([
      "submissions",
      "resolve",
      `p-never-${suffix}`,
      "--outcome",
      "NOT_PAID",
      "--actor",
      "ops",
      "--note",
      "x",
      "--yes",
      "--rail-proxy",
      proxies,
    ]);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("SUBMISSION_NOT_FOUND");
  });
});
