/**
 * Prometheus metrics: one Registry per process (passed by hand, no global), default process
 * metrics, and a tiny HTTP server for /metrics on its own port.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { collectDefaultMetrics, Registry } from "prom-client";

export function createRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * Serves GET /metrics (and /healthz) on host:port. Resolves with the bound port.
 * With `ready`, also GET /readyz: 200 while ready() holds, 503 otherwise. It mirrors
 * grpc.health.v1 in plain HTTP for probes that cannot speak TLS to the service port (kubelet
 * gRPC probes have no TLS), so a draining pod still leaves its Service's endpoints.
 */
export async function serveMetrics(registry: Registry, host: string, port: number, ready?: () => boolean): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/metrics") {
      registry
        .metrics()
        .then((body) => {
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(body);
        })
        .catch(() => {
          res.writeHead(500);
          res.end();
        });
      return;
    }
    if (ready && req.method === "GET" && req.url === "/readyz") {
      const ok = ready();
      res.writeHead(ok ? 200 : 503, { "content-type": "text/plain" });
      res.end(ok ? "ok\n" : "not serving\n");
      return;
    }
    if (req.method === "GET" && req.url === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok\n");
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
