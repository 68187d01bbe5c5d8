/**
 * The three-member etcd the quorum drills run on starts even when a port picked free is taken
 * before etcd binds it (a drill once failed so: "etcd-1 exited", bind: address already in use).
 * Planted: the first port handed out is held by a listening socket; the cluster must start on
 * fresh ports, say that it did, and answer.
 */
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, expect, it } from "vitest";
import { EtcdCluster } from "../../tools/harness/etcd-cluster.js";
import { freePort } from "../../tools/harness/ports.js";

let held: Server | undefined;
// etcd's peers dial the taken port too: their connections must end for the server to close.
const accepted: Socket[] = [];
let cluster: EtcdCluster | undefined;
afterEach(async () => {
  await cluster?.destroy();
  cluster = undefined;
  for (const s of accepted.splice(0)) s.destroy();
  await new Promise<void>((resolve) => (held ? held.close(() => resolve()) : resolve()));
  held = undefined;
});

it("a member whose port was taken before it bound: the cluster starts again on fresh ports", async () => {
  const taken = await new Promise<number>((resolve) => {
    held = createServer((s) => accepted.push(s)).listen(0, "127.0.0.1", () => resolve((held!.address() as { port: number }).port));
  });
  let handedOut = 0;
  const lines: string[] = [];
  cluster = await EtcdCluster.start({
    port: () => (handedOut++ === 0 ? Promise.resolve(taken) : freePort()),
    log: (line) => lines.push(line),
  });
  expect(lines.some((l) => l.includes("starting again on fresh ports"))).toBe(true);
  expect(cluster.members.every((m) => m.clientPort !== taken && m.peerPort !== taken)).toBe(true);
  expect(await cluster.leader()).toBeDefined();
}, 120_000);
