/**
 * A span exporter that appends one JSON object per span to a file (JSON lines). `npm start`
 * uses it when no OTLP endpoint is configured, so `railfence trace <payout_id>` can print a
 * payout's trace without any collector.
 */
import { appendFile } from "node:fs/promises";
import type { ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";

const hrToMs = (t: [number, number]) => t[0] * 1000 + t[1] / 1e6;

export class JsonLinesSpanExporter implements SpanExporter {
  constructor(private readonly path: string) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const lines = spans
      .map((s) =>
        JSON.stringify({
          traceId: s.spanContext().traceId,
          spanId: s.spanContext().spanId,
          parentSpanId: s.parentSpanContext?.spanId,
          name: s.name,
          kind: s.kind,
          service: s.resource.attributes["service.name"],
          startMs: hrToMs(s.startTime),
          durationMs: Math.round(hrToMs(s.duration) * 1000) / 1000,
          status: s.status.code,
          attributes: s.attributes,
          links: s.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId })),
        }),
      )
      .join("\n");
    appendFile(this.path, `${lines}\n`).then(
      () => done({ code: 0 }),
      (error: Error) => done({ code: 1, error }),
    );
  }

  async shutdown(): Promise<void> {}
}
