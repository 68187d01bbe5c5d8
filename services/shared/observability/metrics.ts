/**
 * Prometheus metrics: one Registry per process (passed by hand, no global), default process
 * metrics, and a tiny HTTP server for /metrics on its own port. Naming: decision 057.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { collectDefaultMetrics, Registry } from "prom-client";

/**
 * prom-client's gauges named like counters (`promtool check metrics`: "non-counter metrics should
 * not have _total suffix"). Their per-type siblings (`nodejs_active_handles{type}` etc.) stay and
 * sum to the same number.
 */
const GAUGES_NAMED_LIKE_COUNTERS = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

/**
 * A registry whose every series carries `component` (not `service`: a ServiceMonitor sets
 * `service` to the Kubernetes Service's name, and ours would arrive as `exported_service`).
 */
export function createRegistry(component: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_LIKE_COUNTERS) registry.removeSingleMetric(name);
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
