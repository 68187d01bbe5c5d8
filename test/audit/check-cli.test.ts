/**
 * `railfence check` as an operator runs it against a mesh like `npm start`'s (mutual TLS, the
 * operator's certificate, paydb as the auditor role): a clean verdict and exit 0 on an honest
 * history; a planted double payment makes it exit 5 and name the payout.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { testMesh } from "../support/test-mesh.js";
import { poolFor } from "../executor/support.js";
import { railfence } from "../cli/run-railfence.js";

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
  const operator = mesh.identityFiles("operator");
  writeFileSync(
    join(cwd, "endpoints.json"),
    JSON.stringify({ paydbAudit: mesh.roleUrl("paydb", "auditor"), railProxy: mesh.proxies.map((p) => p.url), tls: { cert: operator.cert, key: operator.key, ca: operator.ca } }),
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
    await paydb.query("INSERT INTO payouts (payout_id, client_id, account_id, amount_minor, currency, beneficiary, state, fence) VALUES ('po-cli-1', 'c', 'acc-cli', 500, 'EUR', 'ben-cli', 'PROCESSING', 2)");
    await paydb.query("SELECT rail_admit('po-cli-1', 'po-cli-1', 'acc-cli', 2, 500, 'EUR', 'ben-cli', 'r', true, true, true)");
    await raildb.query("INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ('rr_cli_1', 'po-cli-1', 'acc-cli', 'ben-cli', 500, 'EUR', 'ACCEPTED')");
    await paydb.query("UPDATE rail_submissions SET state = 'ACCEPTED', rail_reference = 'rr_cli_1' WHERE payout_id = 'po-cli-1'");
    await paydb.query("UPDATE payouts SET state = 'PAID', rail_reference = 'rr_cli_1' WHERE payout_id = 'po-cli-1'");
    const r = await check("--quiescent");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("PASS: every invariant holds");
    expect(r.stdout).toContain("| INV-02 | PASS | 0 |");
  });

  it("names a planted double payment and exits 5; --json carries the rows", async () => {
    await raildb.query("INSERT INTO payments (rail_reference, client_reference, account_id, beneficiary, amount_minor, currency, status) VALUES ('rr_cli_2', 'po-cli-1.retry', 'acc-cli', 'ben-cli', 500, 'EUR', 'ACCEPTED')");
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

  it("refuses a bad window as a usage error, touching nothing", async () => {
    const r = await check("--since", "yesterday-ish");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--since must be an ISO-8601 instant");
  });
});
