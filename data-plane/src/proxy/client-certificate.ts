/**
 * The client certificate of a mutual-TLS proxy listener (PROXY_TLS_CLIENT_CA), told to the upstream in
 * `X-Forwarded-Client-Cert` as Envoy writes it: `Hash=<SHA-256 of the DER, hex>;Subject="<subject>"`. A
 * client's own copy of the header never goes upstream (proxy/headers.ts), as with Envoy's default (SANITIZE).
 */
import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { isHttp2 } from '../plugins/request-framing.js';

/** Per connection (an HTTP/1.1 socket, an h2 session): its requests share one certificate. */
const byConnection = new WeakMap<object, string | null>();

/** `X-Forwarded-Client-Cert` for the request's connection, or null when the client presented no certificate. */
export function forwardedClientCert(req: IncomingMessage): string | null {
  const connection: object = isHttp2(req) ? (req as unknown as Http2ServerRequest).stream.session! : req.socket;
  let value = byConnection.get(connection);
  if (value === undefined) {
    const certificate = (req.socket as TLSSocket).getPeerX509Certificate?.();
    value = certificate ? `Hash=${certificate.fingerprint256.replace(/:/g, '').toLowerCase()};Subject="${certificate.subject.split('\n').join(',').replace(/["\\]/g, '\\$&')}"` : null;
    byConnection.set(connection, value);
  }
  return value;
}
