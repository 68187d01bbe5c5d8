/** Smoke run of the benchmark's RPC-floor harness: it measures real calls and counts failures as failures. */
import http2 from "node:http2";
import { afterEach, describe, expect, it } from "vitest";
import { rawHealthClient, rpcFloor } from "./rpc-floor.js";

let server: http2.Http2Server | undefined;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

describe("bench RPC floor", () => {
  it("measures a real server process: calls succeed and the server's CPU is charged", async () => {
    const [point] = await rpcFloor("connect-node", [2], 0.3);
    expect(point!.ops).toBeGreaterThan(10);
    expect(point!.errors).toEqual({});
    expect(point!.serverCpuUsPerCall).toBeGreaterThan(0);
  });

  it("a call the server fails is an error, not a measured success", async () => {
    server = http2.createServer();
    server.on("stream", (stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "12", "grpc-message": "unimplemented" }));
      stream.resume();
      stream.end();
    });
    const port = await new Promise<number>((r) => server!.listen(0, "127.0.0.1", () => r((server!.address() as { port: number }).port)));
    const client = rawHealthClient(`http://127.0.0.1:${port}`);
    try {
      await expect(client.call()).rejects.toThrow("grpc-status 12");
    } finally {
      client.close();
    }
  });
});
