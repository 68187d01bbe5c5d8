/**
 * `railfence check` as the daily audit runs it against a mesh like `npm start`'s (mutual TLS, the
 * auditor's own certificate, paydb as the auditor role): a clean verdict and exit 0 on an honest
 * history; a planted double payment makes it exit 5 and name the payout. The auditor's
 * certificate reads the statement and nothing else.
 */
import { Code } from "@connectrpc/connect";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { testMesh } from "../support/test-mesh.js";
import { poolFor } from "../executor/support.js";
import { railfence } from "../cli/run-railfence.js";
import { RailProxyService, ResolutionOutcome } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { expectRejected } from "../support/clients.js";
import { clientAs } from "../security/support.js";

let mesh: Mesh;
let paydb: pg.Pool;
let raildb: pg.Pool;
let cwd: string;

beforeAll(async () => {
  mesh = testMesh({ proxies: 1, tls: true });
  await mesh.start();
  paydb = poolFor(mesh.dbUrl("paydb"));
  raildb = poolFor(mesh.dbUrl("raildb"));
  cwd = mkdtempSync(join(tmpdir(), "railfence-check-"));
  const auditor = mesh.identityFiles("auditor");
  writeFileSync(
    join(cwd, "endpoints.json"),
    JSON.stringify({
      paydbAudit: mesh.roleUrl("paydb", "auditor"),
      railProxy: mesh.proxies.map((p) => p.url),
      tls: { cert: auditor.cert, key: auditor.key, ca: auditor.ca },
    }),
  );
});

afterAll(async () => {
  await paydb?.end();
  await raildb?.end();
  await mesh?.stop();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

const check = (...args: string[]) => railfence(["check", "--endpoints-file", join(cwd, "endpoints.json"), ...args], { cwd });

describe("railfence check", () => {
  it("prints a clean verdict and exits 0 on an honest history", async () => {
    // One honest payment: payout fenced, admitted by the real statement, paid, recorded.
    await paydb.query(
      "INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence) VALUES ('po-cli-1', 'c', 'acc-cli', 500, 'EUR', 'ben-cli', 'PROCESSING', 2)",
    );
    await paydb.query("SELECT rail_admit('po-cli-1', 'po-cli-1', 'acc-cli', 2, 500, 'EUR', 'ben-cli', 'r')");
    await raildb.query(
      "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ('rr_cli_1', 'po-cli-1', 'acc-cli', 'ben-cli', 500, 'EUR', 'ACCEPTED')",
    );
    await paydb.query("UPDATE rail_submissions SET state = 'ACCEPTED', rail_reference = 'rr_cli_1' WHERE payout_id = 'po-cli-1'");
    await paydb.query("UPDATE payouts SET state = 'PAID', rail_reference = 'rr_cli_1' WHERE payout_id = 'po-cli-1'");
    const r = await check("--quiescent");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("PASS: every invariant holds");
    expect(r.stdout).toContain("| INV-02 | PASS | 0 |");
  });

  it("names a planted double payment and exits 5; --json carries the rows", async () => {
    await raildb.query(
      "INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ('rr_cli_2', 'po-cli-1.retry', 'acc-cli', 'ben-cli', 500, 'EUR', 'ACCEPTED')",
    );
    const r = await check();
    expect(r.code).toBe(5);
    expect(r.stdout).toContain("| INV-02 | FAIL |");
    expect(r.stdout).toMatch(/INV-02: payout_id=po-cli-1 .*rr_cli_1,rr_cli_2/);
    const json = await check("--json");
    expect(json.code).toBe(5);
    const out = JSON.parse(json.stdout) as { verdict: string; violations: Array<{ invariant: string; row: Record<string, unknown> }> };
    expect(out.verdict).toBe("FAIL");
    expect(out.violations.find((v) => v.invariant === "INV-02")?.row).toMatchObject({ payout_id: "po-cli-1", payments: 2 });
  });

  it("the auditor's certificate reads the statement and is refused everything else (permission_denied, nothing changes)", async () => {
    const proxy = clientAs(RailProxyService, mesh.proxies[0]!.url, mesh.identityFiles("auditor"));
    expect((await proxy.getRailStatement({ pageSize: 10 })).payments).toBeDefined();
    const before = (await paydb.query("SELECT payout_id, state FROM rail_submissions ORDER BY payout_id")).rows;
    await expectRejected(
      proxy.resolveSubmission({ payoutId: "po-cli-1", outcome: ResolutionOutcome.NOT_PAID, actor: "auditor", note: "must be refused" }),
      Code.PermissionDenied,
      "PERMISSION_DENIED",
    );
    await expectRejected(proxy.listUnresolved({}), Code.PermissionDenied, "PERMISSION_DENIED");
    await expectRejected(proxy.getSubmission({ payoutId: "po-cli-1" }), Code.PermissionDenied, "PERMISSION_DENIED");
    await expectRejected(
      proxy.submitPayout({
        accountId: "acc-cli",
        payoutId: "po-cli-1",
        fencingToken: 99n,
        amount: { amountMinor: 500n, currency: "EUR" },
        beneficiary: "ben-cli",
      }),
      Code.PermissionDenied,
      "PERMISSION_DENIED",
    );
    expect((await paydb.query("SELECT payout_id, state FROM rail_submissions ORDER BY payout_id")).rows).toEqual(before);
  });

  it("says what it could not read: paydb or rail-proxy unreachable exit 3, a role without the auditor's grants exit 1", async () => {
    const noPaydb = await check("--paydb", "postgresql://railfence_auditor@127.0.0.1:1/paydb", "--json");
    expect(noPaydb.code).toBe(3);
    expect(JSON.parse(noPaydb.stderr).error).toMatchObject({ code: "unavailable", message: expect.stringContaining("paydb unreachable") });
    const noProxy = await check("--rail-proxy", "https://127.0.0.1:1", "--json");
    expect(noProxy.code).toBe(3);
    expect(JSON.parse(noProxy.stderr).error).toMatchObject({ code: "unavailable", endpoint: "https://127.0.0.1:1" });
    // The executor's role may not read the ledger: PostgreSQL's refusal, named, not an internal failure.
    const wrongRole = await check("--paydb", mesh.roleUrl("paydb", "executor"));
    expect(wrongRole.code).toBe(1);
    expect(wrongRole.stderr).toMatch(/paydb refused the audit \(SQLSTATE 42501\): permission denied/);
    expect(wrongRole.stderr).not.toContain("internal");
  });

  it("refuses a bad window as a usage error, touching nothing", async () => {
    const r = await check("--since", "yesterday-ish");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--since must be an ISO-8601 instant");
  });
});
