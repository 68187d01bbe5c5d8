/** Clients for the security tests: Connect clients calling as a given certificate (or none). */
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import { connect as tlsConnect, type PeerCertificate } from "node:tls";
import { Pki, type IdentityFiles } from "../../tools/harness/pki.js";

/** TLS material a test client presents: a full identity, or only a CA to trust (no certificate). */
export type ClientTls = IdentityFiles | { ca: string };

/**
 * A client of service at baseUrl presenting tls. Every transport here keeps no warm connection
 * the test must close: sessions idle out, and the test processes stop with the mesh.
 */
export function clientAs<S extends DescService>(service: S, baseUrl: string, tls: ClientTls): Client<S> {
  const nodeOptions = "cert" in tls ? Pki.nodeOptions(tls) : { ca: readFileSync(tls.ca) };
  return createClient(service, createGrpcTransport({ baseUrl, nodeOptions, idleConnectionTimeoutMs: 1000 }));
}

/** Opens one raw TLS connection (ALPN h2) and returns the server's certificate. */
export function serverCertificate(port: number, tls: ClientTls): Promise<PeerCertificate> {
  const opts = "cert" in tls ? Pki.nodeOptions(tls) : { ca: readFileSync(tls.ca) };
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
