/**
 * The telemetry start-up module exports with the protocol and resource the standard OTEL_*
 * variables ask for: http/protobuf (the SDK's and the chart's default) and http/json, with
 * OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES on every span. A real process, loaded the way
 * the image loads it (NODE_OPTIONS=--import), exits on its own: its spans must be flushed.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { eventually } from "../support/clients.js";
import { OtlpReceiver } from "./otlp-receiver.js";

let receiver: OtlpReceiver;
beforeAll(async () => {
  receiver = await new OtlpReceiver().start();
});
afterAll(async () => {
  await receiver?.stop();
});

const instrumentation = join(projectRoot(), "dist", "services", "shared", "observability", "instrumentation.js");

/** A process that makes one span (with an attribute) under the given protocol, then exits. */
function emit(protocol: string, name: string, script = spanScript(name), extraEnv: Record<string, string> = {}): Promise<number | null> {
  const child = spawn(process.execPath, ["-e", script], {
    cwd: projectRoot(),
    stdio: "ignore",
    env: {
      PATH: process.env.PATH,
      NODE_OPTIONS: `--import=${instrumentation}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_SERVICE_NAME: "probe",
      OTEL_RESOURCE_ATTRIBUTES: "k8s.pod.name=probe-1,service.namespace=railfence",
      ...extraEnv,
    },
  });
  return new Promise((resolve) => child.on("exit", resolve));
}

const spanScript = (name: string) =>
  `import("@opentelemetry/api").then(({ trace }) => trace.getTracer("probe").startActiveSpan(${JSON.stringify(name)}, (s) => { s.setAttribute("railfence.probe", 42); s.end(); }))`;

describe("OTLP export from the instrumentation", () => {
  it.each(["http/protobuf", "http/json"])("%s: span, attributes and resource arrive", async (protocol) => {
    const name = `probe-${protocol}`;
    expect(await emit(protocol, name)).toBe(0);
    const span = await eventually(async () => receiver.spans.find((s) => s.name === name), `${name} at the receiver`, 10_000);
    expect(span.service).toBe("probe");
    expect(span.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(span.attributes["railfence.probe"]).toBe(42);
    expect(span.resource).toMatchObject({ "k8s.pod.name": "probe-1", "service.namespace": "railfence", "service.name": "probe" });
  });

  it("exports traces only: no OTel metrics or logs pipeline (metrics are Prometheus, logs are stdout)", async () => {
    // A process that records an OTel metric and waits through several export intervals. Left to
    // its defaults the SDK starts OTLP metrics and logs exporters as well, and this metric (and
    // the pg instrumentation's per-query histograms) would be posted to /v1/metrics.
    const name = "probe-traces-only";
    const script = `import("@opentelemetry/api").then(async ({ trace, metrics }) => {
      metrics.getMeter("probe").createCounter("railfence_probe_total").add(1);
      trace.getTracer("probe").startActiveSpan(${JSON.stringify(name)}, (s) => s.end());
      // The probe lives 1.5 s (a quiet window: its metrics exporter, every 200 ms, would post).
      await (await import("node:timers/promises")).setTimeout(1500);
    })`;
    const before = receiver.paths.length;
    expect(await emit("http/protobuf", name, script, { OTEL_METRIC_EXPORT_INTERVAL: "200", OTEL_BLRP_SCHEDULE_DELAY: "200" })).toBe(0);
    await eventually(async () => receiver.spans.find((s) => s.name === name), `${name} at the receiver`, 10_000);
    const posted = new Set(receiver.paths.slice(before));
    expect([...posted]).toEqual(["/v1/traces"]);
  });
});
