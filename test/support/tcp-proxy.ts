/**
 * A TCP proxy on 127.0.0.1 in front of a real server, for fault injection between two real
 * processes: `refuse()` drops every connection and refuses new ones (a dead host), `blackhole()`
 * accepts connections but never forwards a byte (a partition: the caller waits until its own
 * timeout), `heal()` goes back to forwarding. Always close() it.
 */
import net from "node:net";
import type { AddressInfo } from "node:net";

export type ProxyMode = "forward" | "refuse" | "blackhole";

export class TcpProxy {
  private mode: ProxyMode = "forward";
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
    const server = net.createServer();
    const proxy = await new Promise<TcpProxy>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve(new TcpProxy(server, (server.address() as AddressInfo).port)));
    });
    server.on("connection", (client) => proxy.accept(client, targetPort, targetHost));
    return proxy;
  }

  private accept(client: net.Socket, targetPort: number, targetHost: string): void {
    this.track(client);
    if (this.mode === "refuse") {
      client.destroy();
      return;
    }
    if (this.mode === "blackhole") {
      client.on("data", () => {}); // read and drop
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    this.track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  }

  private track(s: net.Socket): void {
    this.sockets.add(s);
    s.on("close", () => this.sockets.delete(s));
  }

  /** Drops every open connection and refuses new ones. */
  refuse(): void {
    this.mode = "refuse";
    for (const s of this.sockets) s.destroy();
  }

  /** Drops every open connection; new ones are accepted and never answered. */
  blackhole(): void {
    this.mode = "blackhole";
    for (const s of this.sockets) s.destroy();
  }

  heal(): void {
    this.mode = "forward";
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
