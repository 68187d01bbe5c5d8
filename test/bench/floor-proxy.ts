/**
 * Bench workload F: forks the design's floor (floor-proxy-server.ts) against its own paydb and
 * rail stub. What the real proxy costs above it is railfence's and its RPC stack's; what the
 * floor itself costs is the protocol's (two pg round trips, one HTTP/2 call served, one made).
 */
import { fork } from "node:child_process";
import { join } from "node:path";

export interface FloorProxy {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export async function startFloorProxy(paydbUrl: string, railUrl: string, credential: string, groupSize = 1): Promise<FloorProxy> {
  const child = fork(join(import.meta.dirname, "floor-proxy-server.ts"), [paydbUrl, railUrl, credential, String(groupSize)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once("message", (m) => resolve(m as number));
    child.once("exit", (code) => reject(new Error(`floor proxy exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
