/**
 * A TCP proxy in front of PostgreSQL that counts round trips: every ReadyForQuery message the
 * server sends ends one (a simple query, or an extended-protocol Parse/Bind/Execute/Sync sent
 * together, as node-postgres does). Counts per direction of the protocol, not per packet, so
 * TCP segmentation does not matter. Always close() it.
 */
import net from "node:net";
import type { AddressInfo } from "node:net";

export class PgRoundTripCounter {
  /** ReadyForQuery messages seen, over every connection. */
  roundTrips = 0;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number): Promise<PgRoundTripCounter> {
    const server = net.createServer();
    const counter = await new Promise<PgRoundTripCounter>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve(new PgRoundTripCounter(server, (server.address() as AddressInfo).port)));
    });
    server.on("connection", (client) => counter.accept(client, targetPort));
    return counter;
  }

  private accept(client: net.Socket, targetPort: number): void {
    const upstream = net.connect(targetPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    // Backend messages: a type byte, then an int32 length that counts itself but not the type.
    let pending = Buffer.alloc(0);
    upstream.on("data", (chunk: Buffer) => {
      client.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5) {
        const length = pending.readInt32BE(1);
        if (pending.length < 1 + length) break;
        if (pending[0] === 0x5a) this.roundTrips += 1; // 'Z' ReadyForQuery
        pending = pending.subarray(1 + length);
      }
    });
    upstream.on("end", () => client.end());
    client.on("end", () => upstream.end());
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
