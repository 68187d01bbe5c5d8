/**
 * Who is calling, from the verified client certificate of the connection (mutual TLS).
 *
 * The identity is the last segment of a SAN URI `spiffe://railfence/<identity>`; a certificate
 * without such a URI falls back to its first DNS SAN. Only a certificate the server verified
 * against its CA counts: an unverified one (TLS_CLIENT_AUTH=request) yields no identity.
 */
import { createContextKey, createContextValues, type ContextValues } from "@connectrpc/connect";
import type { Http2ServerRequest } from "node:http2";
import type { IncomingMessage } from "node:http";
import type { TLSSocket } from "node:tls";

/** Trust domain of every railfence identity. */
export const TRUST_DOMAIN = "railfence";

const IDENTITY = /^[A-Za-z0-9._-]{1,64}$/;

/** The caller's identity in handler/interceptor context values; undefined = not authenticated. */
export const peerIdentityKey = createContextKey<string | undefined>(undefined, { description: "railfence peer identity" });

/**
 * Parses a certificate's subjectaltname string ("URI:spiffe://railfence/executor, DNS:localhost")
 * into an identity, or undefined when it names none in our trust domain.
 */
export function identityFromSan(subjectAltName: string | undefined): string | undefined {
  if (!subjectAltName) return undefined;
  const entries = subjectAltName.split(/,\s*/);
  const prefix = `URI:spiffe://${TRUST_DOMAIN}/`;
  for (const e of entries) {
    if (e.startsWith(prefix)) {
      const id = e.slice(prefix.length);
      if (IDENTITY.test(id)) return id;
    }
  }
  for (const e of entries) {
    if (e.startsWith("DNS:")) {
      const id = e.slice(4);
      if (IDENTITY.test(id)) return id;
    }
  }
  return undefined;
}

/** The verified identity of a TLS socket (undefined on cleartext or an unverified peer). */
export function socketIdentity(socket: TLSSocket): string | undefined {
  if (typeof socket.getPeerCertificate !== "function" || socket.authorized !== true) return undefined;
  const cert = socket.getPeerCertificate(false);
  return identityFromSan(cert?.subjectaltname);
}

/**
 * connect-node `contextValues` factory: resolves the identity once per HTTP/2 session (all its
 * streams share one handshake) and hands it to interceptors and handlers.
 */
export function identityContextValues(): (req: Http2ServerRequest | IncomingMessage) => ContextValues {
  const bySession = new WeakMap<object, string | undefined>();
  return (req) => {
    const values = createContextValues();
    const session = "stream" in req ? (req.stream as { session?: object }).session : undefined;
    let id: string | undefined;
    if (session && bySession.has(session)) {
      id = bySession.get(session);
    } else {
      id = socketIdentity(req.socket as TLSSocket);
      if (session) bySession.set(session, id);
    }
    return values.set(peerIdentityKey, id);
  };
}
