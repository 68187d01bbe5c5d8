/**
 * A quiet mesh exports (almost) nothing: the executors' claim polls, the proxies' sweeps, the
 * payouts purge and health probes are polling, not work, and make no spans. Before, they made
 * most of the spans a collector received (~600 of ~680 in a quiet minute), burying the payouts.
 * One payout made afterwards is still traced end to end.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../tools/harness/mesh.js";
import { PayoutService } from "../../services/shared/gen/railfence/payouts/v1/payouts_pb.js";
import { connectClient, eventually } from "../support/clients.js";
import { testMesh } from "../support/test-mesh.js";
import { OtlpReceiver } from "./otlp-receiver.js";
import { quietFor } from "../support/time.js";

let receiver: OtlpReceiver;
let mesh: Mesh;
const OTEL = () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_BSP_SCHEDULE_DELAY: "200" });

beforeAll(async () => {
  receiver = await new OtlpReceiver().start();
  mesh = testMesh({
    proxies: 1,
    proxyEnv: { ...OTEL(), SWEEP_INTERVAL_MS: "100" },
    railStubEnv: OTEL(),
    lockEnv: OTEL(),
    executorEnv: { ...OTEL(), POLL_INTERVAL_MS: "50" },
  });
  await mesh.start();
  await mesh.startLock();
  await mesh.startPayouts({ ...OTEL(), IDEMPOTENCY_PURGE_INTERVAL_MS: "200" });
  await mesh.addExecutor();
});

afterAll(async () => {
  await mesh?.stop();
  await receiver?.stop();
});

describe("telemetry in a quiet mesh", () => {
  it("idle polling makes no spans; a payout still gets its trace", async () => {
    // Three seconds of polling: ~60 claim polls, ~30 sweeps, ~15 purges.
    await quietFor(3000, "three seconds of idle polling must make no span");
    expect(receiver.spans.map((s) => s.name)).toEqual([]);

    const payouts = connectClient(PayoutService, mesh.payouts!.url);
    const { payout } = await payouts.createPayout(
      { accountId: "acc-quiet", amount: { amountMinor: 100n, currency: "EUR" }, beneficiary: "ben-quiet" },
      { headers: { "idempotency-key": randomUUID() } },
    );
    await eventually(async () => receiver.spans.some((s) => s.name === "executor PayPayout"), "the payout's executor span", 30_000);
    const create = receiver.spans.find((s) => s.name.endsWith("CreatePayout"))!;
    expect(receiver.spans.filter((s) => s.traceId === create.traceId).some((s) => s.name === "executor PayPayout")).toBe(true);
    expect(payout?.payoutId).toBeDefined();
  });
});
