/**
 * The Go client (clients/go, docs/go-client.md) against a real mesh over mutual TLS: vitest
 * starts the mesh, `go test` in clients/go calls it as the "client" identity (health,
 * CreatePayout and its replay under one Idempotency-Key, an invalid amount and a forbidden call
 * decoded to their reason constants), and this file checks that every named Go test ran and
 * passed: a Go test that skipped counts as a failure here.
 *
 * Negative controls: the same Go tests trusting another CA fail, and without the mesh variables
 * they skip, which the wrapper refuses to count as a pass.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { Pki } from "../../tools/harness/pki.js";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { goBinary, goEnv } from "../../tools/go-tools.js";
import { sql } from "../payouts/support.js";
import { testMesh } from "../support/test-mesh.js";
import { expectPassed, GO_MODULE_DIR, goTest, notPassed } from "./go-support.js";

const MESH_TESTS = ["TestMeshHealthCheck", "TestMeshCreatePayoutReplayGivesTheSamePayout", "TestMeshRefusalInvalidAmount", "TestMeshRefusalForbiddenCall"];
const UNIT_TESTS = [
  "TestRefusalReadsReasonRetryClassAndHint",
  "TestRefusalUsesTheCodeToFindTheRetryClass",
  "TestRefusalIgnoresOtherDomainsAndPlainErrors",
  "TestEveryCatalogueReasonHasAKnownRetryClass",
];
/** A cold first build (grpc, protobuf and the standard library) on two shared cores. */
const COLD_BUILD_MS = 10 * 60_000;

let mesh: Mesh;
const scratch = mkdtempSync(join(tmpdir(), "railfence-go-client-"));

beforeAll(async () => {
  mesh = testMesh({ tls: true, proxies: 1 });
  await mesh.start();
  await mesh.startPayouts();
});

afterAll(async () => {
  await mesh?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** The variables mesh_test.go reads: addresses (host:port) and the "client" identity's files. */
function meshEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const client = mesh.identityFiles("client");
  return {
    RAILFENCE_GO_TEST_PAYOUTS: new URL(mesh.payouts!.url).host,
    RAILFENCE_GO_TEST_RAIL_PROXY: new URL(mesh.proxies[0]!.url).host,
    RAILFENCE_GO_TEST_CERT: client.cert,
    RAILFENCE_GO_TEST_KEY: client.key,
    RAILFENCE_GO_TEST_CA: client.ca,
    ...overrides,
  };
}

describe("Go client against a mutual TLS mesh", () => {
  it(
    "go test ./... passes, and every mesh test and unit test ran",
    async () => {
      const r = await goTest(["./..."], meshEnv());
      console.log(`go test ./... took ${r.seconds.toFixed(1)} s`);
      expectPassed(r, [...MESH_TESTS, ...UNIT_TESTS]);
      // The server's side of the replay: one payout for the Go test's account, not two.
      const rows = await sql<{ n: string }>(mesh.dbUrl("paydb"), "SELECT count(*) AS n FROM payouts WHERE account_id = 'acct-go'");
      expect(rows[0]!.n).toBe("1");
    },
    COLD_BUILD_MS,
  );

  it("docs/go-client.md shows the code of Example() in example_test.go, which go test compiles", () => {
    const example = readFileSync(join(GO_MODULE_DIR, "railfence", "example_test.go"), "utf8");
    const body = /^func Example\(\) \{\n([\s\S]*?)^\}/m.exec(example)?.[1];
    expect(body).toContain("DialMutualTLS");
    const unindented = body!.replace(/^\t/gm, "").trimEnd();
    expect(readFileSync(join(projectRoot(), "docs", "go-client.md"), "utf8")).toContain(`\`\`\`go\n${unindented}\n\`\`\``);
  });

  it("the Go sources are gofmt-clean (generated ones included)", async () => {
    const { stdout } = await promisify(execFile)(join(dirname(goBinary()), "gofmt"), ["-l", "."], { cwd: GO_MODULE_DIR, env: goEnv() });
    expect(stdout.trim()).toBe("");
  });

  it(
    "trusting another CA, the mesh tests fail: the client verifies the server (negative control)",
    async () => {
      const other = await Pki.create(join(scratch, "other-pki"), "not-railfence-ca");
      const r = await goTest(["-run", "TestMesh", "./railfence"], meshEnv({ RAILFENCE_GO_TEST_CA: other.caCert }));
      expect(r.exitCode).not.toBe(0);
      expect(notPassed(r, MESH_TESTS)).toEqual(MESH_TESTS.map((n) => `${n}: fail`));
      expect(r.output).toMatch(/certificate signed by unknown authority/);
    },
    COLD_BUILD_MS,
  );

  it(
    "without the mesh variables the Go tests skip, and the wrapper counts a skip as not passed (negative control)",
    async () => {
      const r = await goTest(["-run", "TestMesh", "./railfence"], meshEnv({ RAILFENCE_GO_TEST_PAYOUTS: "", RAILFENCE_GO_TEST_RAIL_PROXY: "" }));
      expect(r.exitCode).toBe(0);
      expect(notPassed(r, MESH_TESTS)).toEqual(MESH_TESTS.map((n) => `${n}: skip`));
      expect(() => expectPassed(r, MESH_TESTS)).toThrow(/TestMeshHealthCheck: skip/);
    },
    COLD_BUILD_MS,
  );
});
