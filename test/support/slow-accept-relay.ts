/**
 * A rail that is slow to accept connections (test/support/slow-accept-relay.py, a real TCP
 * listener whose accept queue is full until released), in front of a real server on loopback.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { projectRoot } from "../../services/shared/process/project-root.js";
import { eventually } from "./clients.js";

export interface SlowAcceptRelay {
  port: number;
  /** Connections relayed since release. */
  readonly accepted: number;
  /** Distinct matches of the watch pattern in what clients sent through the relay. */
  readonly seen: string[];
  /** From now on every waiting and new connection is accepted and relayed. */
  release(): Promise<void>;
  /** Stop relaying in both directions (bytes held, connections open), and resume. */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  stop(): Promise<void>;
}

/** watch: a regular expression (Python's) looked for in the bytes clients send. */
export async function startSlowAcceptRelay(targetPort: number, watch?: string): Promise<SlowAcceptRelay> {
  const args = [join(projectRoot(), "test", "support", "slow-accept-relay.py"), String(targetPort), ...(watch ? [watch] : [])];
  const child: ChildProcess = spawn("python3", args, {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const events: Array<Record<string, unknown>> = [];
  let buffered = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      events.push(JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>);
      buffered = buffered.slice(nl + 1);
    }
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const port = (await eventually(async () => events.find((e) => typeof e.port === "number"), "the slow-accept relay to listen", 10_000)).port as number;
  return {
    port,
    get accepted() {
      return events.filter((e) => e.event === "accepted").length;
    },
    get seen() {
      return [...new Set(events.filter((e) => e.event === "seen").map((e) => String(e.match)))];
    },
    async release() {
      child.stdin!.write("release\n");
      await eventually(async () => events.some((e) => e.event === "released"), "the relay to release", 10_000);
    },
    async freeze() {
      const seen = events.length;
      child.stdin!.write("freeze\n");
      await eventually(async () => events.slice(seen).some((e) => e.event === "frozen"), "the relay to freeze", 10_000);
    },
    async thaw() {
      const seen = events.length;
      child.stdin!.write("thaw\n");
      await eventually(async () => events.slice(seen).some((e) => e.event === "thawed"), "the relay to thaw", 10_000);
    },
    async stop() {
      child.stdin!.end();
      child.kill("SIGKILL");
      await exited;
    },
  };
}
