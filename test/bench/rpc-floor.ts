/**
 * B5, the RPC floor: what one unary gRPC call costs a Node server on this machine, per server
 * stack, with the same minimal client (hand-written node:http2, so the client's own cost is the
 * same for all). It tells how much of the proxy's CPU per submission is the framework's and not
 * railfence's, and what a change of server stack could win.
 */
import { fork } from "node:child_process";
import http2 from "node:http2";
import { join } from "node:path";
import { closedLoop, cpuSeconds, type PointResult } from "./load.js";

export const RPC_SERVER_KINDS = ["node-http2", "grpc-js", "connect-node", "railfence-gated"] as const;

/** An empty HealthCheckRequest in gRPC framing: no compression flag, zero length. */
const EMPTY_REQUEST = Buffer.alloc(5);

/** Calls Health/Check over one HTTP/2 connection; resolves when the trailers say OK. */
export function rawHealthClient(baseUrl: string): { call: () => Promise<void>; close: () => void } {
  const session = http2.connect(baseUrl);
  const call = () =>
    new Promise<void>((resolve, reject) => {
      const stream = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/grpc", te: "trailers" });
      let status: string | undefined;
      stream.on("trailers", (t) => (status = String(t["grpc-status"])));
      stream.on("data", () => {});
      stream.on("end", () => (status === "0" ? resolve() : reject(new Error(`grpc-status ${status}`))));
      stream.on("error", reject);
      stream.end(EMPTY_REQUEST);
    });
  return { call, close: () => session.close() };
}

/** Runs the closed loop against a server process and charges it the server's user+sys CPU. */
export async function measureServer(baseUrl: string, pid: number, concurrency: number, seconds: number): Promise<PointResult & { serverCpuUsPerCall: number }> {
  const client = rawHealthClient(baseUrl);
  try {
    // Warm-up outside the measured window: JIT, connection and stream windows.
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = 0; i < 300; i++) await client.call();
      }),
    );
    const before = cpuSeconds(pid);
    const r = await closedLoop(
      concurrency,
      seconds,
      0,
      () => client.call(),
      (e) => String(e),
    );
    const served = r.ops + Object.values(r.errors).reduce((a, b) => a + b, 0);
    return { ...r, serverCpuUsPerCall: ((cpuSeconds(pid) - before) * 1e6) / served };
  } finally {
    client.close();
  }
}

/** Forks a bare server of the given kind (rpc-floor-server.ts) and measures it at each concurrency. */
export async function rpcFloor(kind: (typeof RPC_SERVER_KINDS)[number], concurrencies: number[], seconds: number) {
  const child = fork(join(import.meta.dirname, "rpc-floor-server.ts"), [kind], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once("message", (m) => resolve(m as number));
      child.once("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
    });
    const results = [];
    for (const c of concurrencies) results.push({ concurrency: c, ...(await measureServer(`http://127.0.0.1:${port}`, child.pid!, c, seconds)) });
    return results;
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once("exit", r)));
  }
}
