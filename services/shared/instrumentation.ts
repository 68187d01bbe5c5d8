/**
 * Telemetry start-up, loaded before the application (`node --import .../instrumentation.js`,
 * or NODE_OPTIONS in the container image) so pg is instrumented when it is first imported.
 *
 * Configured only by standard OTEL_* variables:
 * - OTEL_SDK_DISABLED=true: nothing starts;
 * - OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: the SDK exports over
 *   OTLP (OTEL_EXPORTER_OTLP_PROTOCOL, default http/protobuf), service name from OTEL_SERVICE_NAME;
 * - otherwise, RAILFENCE_TRACE_FILE set: spans go to that JSON-lines file (local viewing);
 * - otherwise tracing stays off (the API's no-op tracer; no SDK is even loaded).
 */
import { register } from "node:module";

const env = process.env;
const otlp = env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
const file = env.RAILFENCE_TRACE_FILE;

if (env.OTEL_SDK_DISABLED !== "true" && (otlp || file)) {
  register("@opentelemetry/instrumentation/hook.mjs", import.meta.url);
  const [{ NodeSDK }, { PgInstrumentation }, { BatchSpanProcessor }] = await Promise.all([
    import("@opentelemetry/sdk-node"),
    import("@opentelemetry/instrumentation-pg"),
    import("@opentelemetry/sdk-trace-base"),
  ]);
  const spanProcessors = [];
  if (!otlp && file) {
    const { JsonLinesSpanExporter } = await import("./trace-file-exporter.js");
    spanProcessors.push(new BatchSpanProcessor(new JsonLinesSpanExporter(file), { scheduledDelayMillis: 500 }));
  }
  const sdk = new NodeSDK({
    instrumentations: [new PgInstrumentation({ enhancedDatabaseReporting: false })],
    ...(spanProcessors.length ? { spanProcessors } : {}),
  });
  sdk.start();
  (globalThis as { __railfenceTracing?: boolean }).__railfenceTracing = true;
  // Flush on the way out; the services' own SIGTERM handlers call process.exit after draining.
  const flush = () => void sdk.shutdown().catch(() => {});
  process.once("beforeExit", flush);
  (globalThis as { __railfenceTelemetryShutdown?: () => Promise<void> }).__railfenceTelemetryShutdown = () => sdk.shutdown();
}
