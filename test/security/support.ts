/** Clients for the security tests: Connect clients calling as a given certificate (or none). */
import type { Client } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { connect as tlsConnect, type PeerCertificate } from "node:tls";
import { connectClient, tlsNodeOptions, type ClientTls } from "../support/clients.js";

export type { ClientTls };

/**
 * A client of service at baseUrl presenting tls. Every transport here keeps no warm connection
 * the test must close: sessions idle out, and the test processes stop with the mesh.
 */
export function clientAs<S extends DescService>(service: S, baseUrl: string, tls: ClientTls): Client<S> {
  return connectClient(service, baseUrl, { tls, idleConnectionTimeoutMs: 1000 });
}

/** Opens one raw TLS connection (ALPN h2) and returns the server's certificate. */
export function serverCertificate(port: number, tls: ClientTls): Promise<PeerCertificate> {
  const opts = tlsNodeOptions(tls);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, servername: "localhost", ALPNProtocols: ["h2"], ...opts });
    socket.once("secureConnect", () => {
      const peer = socket.getPeerCertificate();
      socket.destroy();
      resolve(peer);
    });
    socket.once("error", (err) => {
      socket.destroy();
      reject(err);
    });
  });
}
