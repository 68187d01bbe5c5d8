/**
 * Telemetry start-up, loaded before the application (`node --import .../instrumentation.js`,
 * or NODE_OPTIONS in the container image) so pg is instrumented when it is first imported.
 * pg is CommonJS, so the SDK's require hook patches it even when ESM code imports it; no ESM
 * loader hook is registered (one would run a loader thread costing ~50 MB of RSS per process,
 * for modules nothing here instruments).
 *
 * Configured only by standard OTEL_* variables:
 * - OTEL_SDK_DISABLED=true: nothing starts;
 * - OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: the SDK exports over
 *   OTLP (OTEL_EXPORTER_OTLP_PROTOCOL, default http/protobuf), service name from OTEL_SERVICE_NAME;
 * - otherwise, RAILFENCE_TRACE_FILE set: spans go to that JSON-lines file (local viewing);
 * - otherwise tracing stays off (the API's no-op tracer; no SDK is even loaded).
 */
import { telemetryStarted } from "./telemetry.js";

const env = process.env;
const otlp = env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
const file = env.RAILFENCE_TRACE_FILE;

if (env.OTEL_SDK_DISABLED !== "true" && (otlp || file)) {
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
    // requireParentSpan: a query outside any traced call (the executor's claim poll, the sweeper,
    // the purge job) makes no span of its own, so a quiet mesh exports payouts, not its polling.
    // ignoreConnectSpans: a pool checkout is not a step of the payout; it doubled the spans per
    // query (docs/benchmarks.md, "telemetry as shipped").
    instrumentations: [new PgInstrumentation({ enhancedDatabaseReporting: false, requireParentSpan: true, ignoreConnectSpans: true })],
    // Traces only. Metrics are Prometheus on /metrics and logs are JSON lines on stdout; left to
    // its defaults the SDK would also start an OTLP metrics and logs pipeline (to localhost:4318
    // when no endpoint is set) and record a histogram per query.
    metricReaders: [],
    logRecordProcessors: [],
    ...(spanProcessors.length ? { spanProcessors } : {}),
  });
  sdk.start();
  // Flush on the way out; the services' own SIGTERM handlers flush before process.exit.
  process.once("beforeExit", () => void sdk.shutdown().catch(() => {}));
  telemetryStarted(() => sdk.shutdown());
}
