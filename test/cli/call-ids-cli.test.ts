/**
 * The compiled CLI prints the server's trace id and the request id it sent when a real payouts
 * process refuses its call (decision 054), and the service logged that very call under both.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServiceProcess } from "../../tools/harness/service-process.js";
import { createPaydb, dropPaydb, startPayouts } from "../payouts/support.js";
import { waitForLog } from "../support/log-events.js";
import { railfence } from "./run-railfence.js";

let paydb: string;
let svc: ServiceProcess;
let cwd: string;

beforeAll(async () => {
  paydb = await createPaydb();
  svc = await startPayouts(paydb);
  cwd = mkdtempSync(join(tmpdir(), "railfence-cli-ids-"));
}, 60_000);

afterAll(async () => {
  await svc?.stop(5000);
  if (paydb) await dropPaydb(paydb);
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

describe("railfence on a refused call", () => {
  it("prints the trace id and request id, which the service's log line for the call carries", async () => {
    const r = await railfence(["payouts", "get", "po_does_not_exist", "--payouts", svc.url], { cwd });
    expect(r.code, r.stderr).toBe(4); // not found
    expect(r.stderr).toContain("PAYOUT_NOT_FOUND");
    const ids = /trace id: ([0-9a-f]{32}) {2}request id: (cli-[0-9a-f-]{36})/.exec(r.stderr);
    expect(ids, r.stderr).not.toBeNull();
    const [, traceId, requestId] = ids!;
    const line = await waitForLog(svc, (e) => e.request_id === requestId, "the CLI's refused call");
    expect(line).toMatchObject({ event: "rpc_error", reason: "PAYOUT_NOT_FOUND", trace_id: traceId });
  });

  it("--json carries them as fields", async () => {
    const r = await railfence(["payouts", "get", "po_does_not_exist", "--payouts", svc.url, "--json"], { cwd });
    const report = JSON.parse(r.stderr) as { error: { traceId?: string; requestId?: string } };
    expect(report.error.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(report.error.requestId).toMatch(/^cli-/);
  });
});
