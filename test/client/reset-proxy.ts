/**
 * A TCP proxy on 127.0.0.1 that loses one answer the way a network does: on the FIRST
 * connection it forwards the client's bytes to the server, but once those bytes contain `watch`
 * (e.g. the account id of the request it is waiting for) it stops passing the server's bytes
 * back. The request reaches the server and runs there; its answer goes nowhere. `reset()` then
 * resets the client's socket (a TCP RST: the client reads ECONNRESET, which connect-node reports
 * as `aborted`). Every later connection is forwarded normally, so a retry gets through.
 * Always close() it.
 */
import net from "node:net";
import type { AddressInfo } from "node:net";

export class ResetProxy {
  private readonly sockets = new Set<net.Socket>();
  private connections = 0;
  private first: { client: net.Socket; upstream: net.Socket } | undefined;
  private seenResolve!: () => void;
  /** Resolves when the watched bytes went to the server on the first connection. */
  readonly requestSeen: Promise<void> = new Promise((r) => (this.seenResolve = r));
  /** Bytes of the server's answer dropped on the first connection. */
  dropped = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number, watch: string): Promise<ResetProxy> {
    const server = net.createServer();
    const proxy = await new Promise<ResetProxy>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve(new ResetProxy(server, (server.address() as AddressInfo).port)));
    });
    server.on("connection", (client) => proxy.accept(client, targetPort, Buffer.from(watch)));
    return proxy;
  }

  /** Connections accepted so far (the first is the one whose answer is lost). */
  get accepted(): number {
    return this.connections;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private accept(client: net.Socket, targetPort: number, watch: Buffer): void {
    const n = ++this.connections;
    const upstream = net.connect(targetPort, "127.0.0.1");
    this.track(client);
    this.track(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
    if (n > 1) {
      client.pipe(upstream);
      upstream.pipe(client);
      return;
    }
    this.first = { client, upstream };
    let sent = Buffer.alloc(0);
    let losing = false;
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk);
      if (losing) return;
      // Keep only a tail long enough to find the pattern across chunk boundaries.
      sent = Buffer.concat([sent, chunk]).subarray(-64 * 1024);
      if (sent.includes(watch)) {
        losing = true;
        this.seenResolve();
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      if (losing) this.dropped += chunk.length;
      else client.write(chunk);
    });
  }

  private track(s: net.Socket): void {
    this.sockets.add(s);
    s.on("close", () => this.sockets.delete(s));
  }

  /** Resets the first client connection (RST) and closes its upstream. */
  reset(): void {
    if (!this.first) throw new Error("no connection to reset");
    this.first.client.resetAndDestroy();
    this.first.upstream.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
