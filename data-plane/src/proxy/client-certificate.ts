/**
 * The client certificate of a mutual-TLS proxy listener (PROXY_TLS_CLIENT_CA), told to the upstream in
 * `X-Forwarded-Client-Cert` as Envoy writes it: `Hash=<SHA-256 of the DER, hex>;Subject="<subject>"`, then
 * `URI=<SAN>` (a SPIFFE id, say) and `DNS=<SAN>` for each such subject alternative name. A value holding `,`
 * `;` `=` or `"` is quoted, as the format asks. A client's own copy of the header never goes upstream
 * (proxy/headers.ts), as with Envoy's default (SANITIZE).
 */
import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { isHttp2 } from '../plugins/request-framing.js';

const quoted = (value: string) => `"${value.replace(/["\\]/g, '\\$&')}"`;
/** Quoted only when the value holds a character the format separates with. */
export const element = (value: string) => (/[,;="]/.test(value) ? quoted(value) : value);

/** The URI and DNS names of node's `subjectAltName` (`DNS:a, URI:spiffe://x`; a name with a comma comes JSON-quoted). */
export function alternativeNames(san: string | undefined): Array<['URI' | 'DNS', string]> {
  const names: Array<['URI' | 'DNS', string]> = [];
  for (const m of (san ?? '').matchAll(/(?:^|, )(URI|DNS):("(?:[^"\\]|\\.)*"|[^,]*)/g)) {
    const raw = m[2]!;
    names.push([m[1] as 'URI' | 'DNS', raw.startsWith('"') ? (JSON.parse(raw) as string) : raw]);
  }
  return names;
}

/** Per connection (an HTTP/1.1 socket, an h2 session): its requests share one certificate. */
const byConnection = new WeakMap<object, string | null>();

/** `X-Forwarded-Client-Cert` for the request's connection, or null when the client presented no certificate. */
export function forwardedClientCert(req: IncomingMessage): string | null {
  const connection: object = isHttp2(req) ? (req as unknown as Http2ServerRequest).stream.session! : req.socket;
  let value = byConnection.get(connection);
  if (value === undefined) {
    const certificate = (req.socket as TLSSocket).getPeerX509Certificate?.();
    value = certificate
      ? [
          `Hash=${certificate.fingerprint256.replace(/:/g, '').toLowerCase()}`,
          `Subject=${quoted(certificate.subject.split('\n').join(','))}`,
          ...alternativeNames(certificate.subjectAltName).map(([kind, name]) => `${kind}=${element(name)}`),
        ].join(';')
      : null;
    byConnection.set(connection, value);
  }
  return value;
}
