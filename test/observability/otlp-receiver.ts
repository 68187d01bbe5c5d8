/** A minimal OTLP/HTTP JSON receiver for tests: collects every span the services export. */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  status: number;
  attributes: Record<string, string | number | boolean>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
const value = (v: AnyValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? ""));

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  private server!: Server;
  port = 0;
  host = "127.0.0.1";

  /** Listens on host (loopback by default; the test cluster's pods reach the node's bridge address). */
  async start(host = "127.0.0.1"): Promise<this> {
    this.host = host;
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (req.url === "/v1/traces") {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
            resourceSpans: Array<{
              resource: { attributes: Array<{ key: string; value: AnyValue }> };
              scopeSpans: Array<{ spans: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; status?: { code?: number }; attributes?: Array<{ key: string; value: AnyValue }> }> }>;
            }>;
          };
          for (const rs of body.resourceSpans ?? []) {
            const service = String(value(rs.resource.attributes.find((a) => a.key === "service.name")?.value ?? {}));
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                this.spans.push({
                  service,
                  traceId: s.traceId,
                  spanId: s.spanId,
                  parentSpanId: s.parentSpanId ?? "",
                  name: s.name,
                  kind: s.kind,
                  status: s.status?.code ?? 0,
                  attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, value(a.value)])),
                });
              }
            }
          }
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
      });
    });
    await new Promise<void>((r) => this.server.listen(0, host, () => r()));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get endpoint(): string {
    return `http://${this.host}:${this.port}`;
  }

  async stop(): Promise<void> {
    // Exporters keep their connections alive: close them, or close() waits for them for ever.
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
