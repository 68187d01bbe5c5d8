/**
 * A TCP proxy in front of PostgreSQL that counts round trips: every ReadyForQuery message the
 * server sends ends one (a simple query, or an extended-protocol Parse/Bind/Execute/Sync sent
 * together, as node-postgres does). Counts per direction of the protocol, not per packet, so
 * TCP segmentation does not matter. Always close() it.
 *
 * It also counts the transactions the server ended, as the wire shows them: a ReadyForQuery in
 * state idle ('I') after a round trip that ran something ends one (an implicit transaction, or
 * BEGIN ... COMMIT), a commit unless the round trip carried an error or a ROLLBACK. Unlike
 * pg_stat_database.xact_commit, nothing else on the server (autovacuum, another client) adds to
 * it, so a test can assert an exact count.
 */
import net from "node:net";
import type { AddressInfo } from "node:net";

/** A CommandComplete body is its command tag, NUL-terminated: "ROLLBACK" ends a transaction undone. */
const isRollbackTag = (body: Buffer) => body.toString("latin1").startsWith("ROLLBACK");

export class PgRoundTripCounter {
  /** ReadyForQuery messages seen, over every connection. */
  roundTrips = 0;
  /** Transactions committed over every connection (see above). */
  commits = 0;
  /** Transactions rolled back (an error in an implicit transaction, or ROLLBACK). */
  rollbacks = 0;
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
    let ready = false; // the first ReadyForQuery ends the start-up, not a transaction
    let failed = false; // the transaction under way saw an ErrorResponse or a ROLLBACK (cleared when it ends)
    upstream.on("data", (chunk: Buffer) => {
      client.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5) {
        const length = pending.readInt32BE(1);
        if (pending.length < 1 + length) break;
        const type = pending[0];
        const body = pending.subarray(5, 1 + length);
        if (type === 0x45 || (type === 0x43 && isRollbackTag(body))) failed = true; // 'E' ErrorResponse, 'C' CommandComplete
        if (type === 0x5a) {
          // 'Z' ReadyForQuery, its status byte: 'I' idle, 'T' in a transaction, 'E' in a failed one
          this.roundTrips += 1;
          const idle = body[0] === 0x49;
          if (idle && ready) {
            if (failed) this.rollbacks += 1;
            else this.commits += 1;
          }
          if (idle) failed = false;
          ready = true;
        }
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
