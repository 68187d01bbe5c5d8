/**
 * grpcurl (the Go tool most teams reach for) against a railfence server over mutual TLS, with
 * reflection as its only schema: a refused CreatePayout prints its google.rpc.ErrorInfo decoded
 * by name, reason and all, because the server's reflection also serves the error detail files
 * (services/shared/rpc/reflection.ts). The negative control gives grpcurl the payouts proto alone,
 * without error_details.proto: then the same detail is undecodable bytes, and the check says so.
 *
 * grpcurl is built from its Go module at a pinned version into .tools/go/bin (tools/go-tools.ts);
 * the first, cold build is slow (see docs/go-client.md), later runs reuse it.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { ensureGoTool } from "../../tools/go-tools.js";
import { testMesh } from "../support/test-mesh.js";
import { newKey } from "../payouts/support.js";

const run = promisify(execFile);
let mesh: Mesh;
let grpcurl: string;

beforeAll(async () => {
  const started = Date.now();
  grpcurl = await ensureGoTool("grpcurl");
  console.log(`grpcurl ready after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  mesh = testMesh({ tls: true, proxies: 1 });
  await mesh.start();
  await mesh.startPayouts();
}, 30 * 60_000);

afterAll(async () => {
  await mesh?.stop();
});

/** Runs grpcurl as the "client" identity; resolves with exit code and output (never throws). */
async function call(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const c = mesh.identityFiles("client");
  const tls = ["-cacert", c.ca, "-cert", c.cert, "-key", c.key, "-max-time", "20"];
  try {
    const { stdout, stderr } = await run(grpcurl, [...tls, ...args], { cwd: projectRoot(), timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** The error details grpcurl printed (its "Details:" section), each parsed as JSON. */
function printedDetails(output: string): Record<string, unknown>[] {
  const at = output.indexOf("Details:");
  if (at < 0) return [];
  // grpcurl prefixes each detail's lines with "  1)\t" and then "    \t".
  const text = output
    .slice(at + "Details:".length)
    .split("\n")
    .map((l) => l.replace(/^\s*(\d+\)\t|\t)/, ""))
    .join("\n");
  const details: Record<string, unknown>[] = [];
  let depth = 0;
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "{" && depth++ === 0) start = i;
    else if (text[i] === "}" && --depth === 0) details.push(JSON.parse(text.slice(start, i + 1)) as Record<string, unknown>);
  }
  return details;
}

/** The reason of the decoded railfence ErrorInfo among details; undefined when there is none. */
function decodedReason(details: Record<string, unknown>[]): string | undefined {
  const info = details.find((d) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo" && d["@error"] === undefined);
  return info?.domain === "railfence.dev" && typeof info.reason === "string" ? info.reason : undefined;
}

const invalidAmount = JSON.stringify({ accountId: "acct-grpcurl", amount: { amountMinor: "-5", currency: "EUR" }, beneficiary: "iban:DE89370400440532013000" });
const createPayout = "railfence.payouts.v1.PayoutService/CreatePayout";

describe("grpcurl over mutual TLS with reflection", () => {
  it("a refused CreatePayout prints google.rpc.ErrorInfo decoded by name, with its reason", async () => {
    const r = await call(["-H", `idempotency-key: ${newKey()}`, "-d", invalidAmount, new URL(mesh.payouts!.url).host, createPayout]);
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.stderr).toContain("Code: InvalidArgument");
    expect(decodedReason(printedDetails(r.stderr)), r.stderr).toBe("AMOUNT_INVALID");
    expect(r.stderr).not.toMatch(/not recognized/);
  });

  it("a call that is allowed succeeds through reflection alone (the TLS setup is right)", async () => {
    const r = await call(["-d", "{}", new URL(mesh.payouts!.url).host, "grpc.health.v1.Health/Check"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ status: "SERVING" });
  });

  it("given only payouts.proto (no error_details.proto), the detail is raw bytes and the check catches it (negative control)", async () => {
    const r = await call([
      ...["-import-path", "proto", "-proto", "railfence/payouts/v1/payouts.proto"],
      ...["-H", `idempotency-key: ${newKey()}`, "-d", invalidAmount, new URL(mesh.payouts!.url).host, createPayout],
    ]);
    expect(r.stderr).toContain("Code: InvalidArgument");
    const details = printedDetails(r.stderr);
    expect(details).toHaveLength(1);
    expect(details[0]!["@error"]).toMatch(/google\.rpc\.ErrorInfo is not recognized/);
    expect(decodedReason(details)).toBeUndefined();
  });
});
