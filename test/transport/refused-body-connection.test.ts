/**
 * Refused bodies cost the connection that sent them, not the server. `npm run hostile` (seed
 * 20261202, 140,000 cases) sent ~400 oversized SubmitPayout calls over one connect-node session:
 * every one was refused REQUEST_TOO_LARGE, then that session's calls timed out and failed with
 * ENHANCE_YOUR_CALM. The memory is the *client's*: the sending side's HTTP/2 session keeps the
 * unsent rest of each refused body counted against its maxSessionMemory (10 MB by default; with
 * 64 MB the same run failed after 578 calls instead of 156, whatever the server did with the
 * stream). railfence's own clients never send a body over the limit. What this test holds the
 * server to: a client pushing refused bodies gets a clean refusal every time, and another
 * connection is served meanwhile and after.
 *
 * Black box: connect-node's gRPC client, one session per client, against a real rail-proxy.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { errorReason } from "../../services/shared/domain/errors.js";
import { ClientPool } from "../support/clients.js";
import { RailProxyService } from "../../services/shared/gen/railfence/railproxy/v1/rail_proxy_pb.js";
import { testMesh } from "../support/test-mesh.js";
import { documentedRequestLimits } from "../fuzz/wire-targets.js";

const LIMIT = documentedRequestLimits()["rail-proxy"]!;
let mesh: Mesh;
const pool = new ClientPool();

beforeAll(async () => {
  mesh = testMesh({ proxies: 1 });
  await mesh.start();
});

afterAll(async () => {
  pool.close();
  await mesh?.stop();
});

describe("a connection that sent refused bodies", () => {
  it("are each refused REQUEST_TOO_LARGE (100 in a row), and another connection is served after them", async () => {
    const client = pool.client(RailProxyService, mesh.proxies[0]!.url);
    const other = pool.client(RailProxyService, mesh.proxies[0]!.url);
    const reasons = new Map<string, number>();
    for (let i = 0; i < 100; i++) {
      const size = LIMIT + 1 + ((i * 7919) % 180_000);
      const err = await client
        .submitPayout(
          { accountId: "x".repeat(size), payoutId: "p-big", fencingToken: 5n, amount: { amountMinor: 5n, currency: "EUR" }, beneficiary: "ben" },
          { timeoutMs: 5000 },
        )
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      const key = err ? `${Code[err.code]}/${errorReason(err) ?? "-"}` : "answered";
      reasons.set(key, (reasons.get(key) ?? 0) + 1);
      if (key !== "InvalidArgument/REQUEST_TOO_LARGE") {
        reasons.set(`${key} ${err?.message}`, 1);
        break;
      }
    }
    expect(Object.fromEntries(reasons)).toEqual({ "InvalidArgument/REQUEST_TOO_LARGE": 100 });
    const after = await other.getSubmission({ payoutId: "p-none" }, { timeoutMs: 5000 }).then(
      () => "found",
      (e: unknown) => Code[ConnectError.from(e).code],
    );
    expect(after).toBe("NotFound");
  }, 120_000);
});
