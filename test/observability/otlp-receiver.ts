/**
 * A minimal OTLP/HTTP receiver for tests (JSON or protobuf): collects every span the services
 * export, with its resource attributes. Listens on 127.0.0.1, or on another local address (the host side of
 * a container network) when asked.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeTraceExport, type AnyValue, type JsonExport } from "./otlp-protobuf.js";

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  status: number;
  attributes: Record<string, string | number | boolean>;
  /** Resource attributes of the exporting process (service.*, k8s.*, deployment.*). */
  resource: Record<string, string | number | boolean>;
}

const value = (v: AnyValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? ""));

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Every request path exporters posted to (/v1/traces, /v1/metrics, /v1/logs). */
  readonly paths: string[] = [];
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
        const protobuf = /protobuf/.test(req.headers["content-type"] ?? "");
        this.paths.push(req.url ?? "");
        if (req.url === "/v1/traces") {
          const raw = Buffer.concat(chunks);
          const body: JsonExport = protobuf ? decodeTraceExport(raw) : (JSON.parse(raw.toString("utf8")) as JsonExport);
          for (const rs of body.resourceSpans ?? []) {
            const resource = Object.fromEntries(rs.resource.attributes.map((a) => [a.key, value(a.value)]));
            const service = String(resource["service.name"] ?? "");
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
                  resource,
                });
              }
            }
          }
        }
        // An empty ExportTraceServiceResponse, in the request's encoding.
        res.writeHead(200, { "content-type": protobuf ? "application/x-protobuf" : "application/json" });
        res.end(protobuf ? "" : "{}");
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, host, () => resolve());
    });
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
