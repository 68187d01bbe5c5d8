/**
 * A stable TCP address in front of whichever PostgreSQL is the primary: what a deployment puts
 * in front of paydb (a Kubernetes Service of the HA operator, HAProxy with a health check, a DNS
 * name that moves). Every service keeps the same PAYDB_URL; a failover repoints the relay and
 * cuts the connections it carried, as HAProxy's `on-marked-down shutdown-sessions` does, so no
 * session survives on a dead or demoted server. While no target is set (the primary is gone and
 * nothing is promoted yet) new connections are closed at once: clients see the outage as it is.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export class TcpRelay {
  private target: number | undefined;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  /** Connections accepted, and those closed because there was no target. */
  readonly stats = { accepted: 0, refused: 0, cut: 0 };

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number | undefined): Promise<TcpRelay> {
    let relay: TcpRelay | undefined;
    const server = createServer((client) => relay!.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (!address || typeof address === "string") throw new Error("relay has no port");
    relay = new TcpRelay(server, address.port);
    relay.target = targetPort;
    return relay;
  }

  get targetPort(): number | undefined {
    return this.target;
  }

  /** Sends new connections to `port` (undefined: refuse them) and cuts every existing one. */
  repoint(port: number | undefined): void {
    this.target = port;
    for (const pair of this.pairs) {
      this.stats.cut++;
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
  }

  private accept(client: Socket): void {
    this.stats.accepted++;
    const port = this.target;
    if (port === undefined) {
      this.stats.refused++;
      client.destroy();
      return;
    }
    const upstream = connect({ host: "127.0.0.1", port });
    const pair = { client, upstream };
    this.pairs.add(pair);
    const close = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  async stop(): Promise<void> {
    this.repoint(undefined);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
