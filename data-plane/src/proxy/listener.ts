/**
 * The proxy's listening server: HTTP/1.1, HTTPS (PROXY_TLS_*, with h2 by ALPN under PROXY_HTTP2) or HTTP/1.1 with
 * h2c (PROXY_H2C), with the client limits every connection gets, and its connections as a drain handles them; and
 * the Gateway API HTTPS listener (GATEWAY_HTTPS_PORT), whose certificates come with the snapshot, picked by SNI.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { SecureContext } from 'node:tls';
import type { CertificateSet, CertificateWatcher } from '#proto/certificate-files';
import type { GatewayTlsContexts, TableSource } from '../table/index.js';
import { ProxyResponse } from './forward.js';
import { acceptH2c, createHttp2Listener, type Http2Connections, type Http2Listener } from './http2.js';

/**
 * Slow clients must not hold connections open forever (slowloris): headers within 30 s, the whole
 * request (body included, it streams upstream) within 5 minutes; 16 KiB of headers at most.
 */
const CLIENT_LIMITS = { headersTimeout: 30_000, requestTimeout: 300_000, maxHeaderSize: 16 * 1024 };

export type ProxyHttpServer =
  | Server<typeof IncomingMessage, typeof ProxyResponse>
  | HttpsServer<typeof IncomingMessage, typeof ProxyResponse>
  | Http2Listener['server'];

export interface ListenerOptions {
  /** PROXY_TLS_CERT / PROXY_TLS_KEY: the listener serves HTTPS with the watched files (new ones for new connections). */
  tls?: CertificateWatcher | null;
  /** PROXY_HTTP2: with `tls`, h2 is offered by ALPN beside HTTP/1.1 (http2.ts). */
  http2?: boolean;
  /** PROXY_H2C: without `tls`, a connection that opens with the HTTP/2 preface is served h2 (http2.ts acceptH2c). */
  h2c?: boolean;
  /** PROXY_TLS_MIN_VERSION (default TLSv1.2). */
  tlsMinVersion?: 'TLSv1.2' | 'TLSv1.3';
}

/** PROXY_TLS_CLIENT_CA: every client presents a certificate that CA signed, or its handshake fails. */
export const requiresClientCertificates = (tls: CertificateWatcher | null | undefined): boolean => tls?.current().ca !== undefined;

/**
 * The server, serving requests with `handle`; `refuseHost` answers an h2 request whose Host contradicts its
 * `:authority`, or that has neither (http2.ts). `connections`: HTTP/1.1 ones from node:http, or h2 and HTTP/1.1 from
 * http2.ts.
 */
export function createListener(
  deps: ListenerOptions,
  handle: (req: IncomingMessage, res: ProxyResponse) => void,
  refuseHost: (req: IncomingMessage, res: ServerResponse) => void,
): { server: ProxyHttpServer; connections: Http2Connections } {
  const options = { ...CLIENT_LIMITS, ServerResponse: ProxyResponse };
  const tls = deps.tls;
  const clientCertificates = requiresClientCertificates(tls);
  let server: ProxyHttpServer;
  let connections: Http2Connections;
  if (tls) {
    // TLS 1.2 at least (node's default, stated so no environment lowers it) unless PROXY_TLS_MIN_VERSION raises it.
    const minVersion = deps.tlsMinVersion ?? 'TLSv1.2';
    const context = ({ cert, key, ca }: CertificateSet) => ({ cert, key, minVersion, ...(ca && { ca }) });
    const verify = clientCertificates ? { requestCert: true, rejectUnauthorized: true } : {};
    let secure: Http2Listener['server'] | HttpsServer<typeof IncomingMessage, typeof ProxyResponse>;
    if (deps.http2) {
      const http2 = createHttp2Listener({ ...context(tls.current()), ...verify }, options, handle, refuseHost);
      secure = http2.server;
      connections = http2;
    } else {
      const https = createHttpsServer({ ...options, ...context(tls.current()), ...verify, ALPNProtocols: ['http/1.1'] }, handle);
      secure = https;
      connections = { goAway() {}, drain: () => https.closeIdleConnections(), cut: () => https.closeAllConnections() };
    }
    tls.subscribe((set) => secure.setSecureContext(context(set)));
    server = secure;
  } else {
    const http = createServer(options, handle);
    const h2c = deps.h2c ? acceptH2c(http, options, handle, refuseHost) : null;
    connections = {
      goAway() {
        h2c?.goAway();
      },
      drain() {
        h2c?.drain();
        http.closeIdleConnections();
      },
      cut() {
        h2c?.cut();
        http.closeAllConnections();
      },
    };
    server = http;
  }
  return { server, connections };
}

/** What a client's SNI name gets on the Gateway HTTPS listener: a context, or a failed handshake. */
export function sniContext(tls: GatewayTlsContexts | null | undefined, servername: string): SecureContext | Error {
  return tls?.forServername(servername) ?? new Error(`no Gateway HTTPS listener takes the name ${JSON.stringify(servername.slice(0, 253))}`);
}

/**
 * GATEWAY_HTTPS_PORT: HTTPS (h2 by ALPN too under PROXY_HTTP2) with the certificates of the serving table each
 * connection starts under (tables.current().gatewayTls), chosen by SNI (sniContext); a name no listener takes fails
 * the handshake. A client without SNI gets the listener without hostname, when there is one (the server's default
 * context, set from the current table as each connection arrives), else its handshake fails (no certificate).
 */
export function createGatewayTlsListener(
  deps: { tables: TableSource; http2?: boolean; tlsMinVersion?: 'TLSv1.2' | 'TLSv1.3' },
  handle: (req: IncomingMessage, res: ProxyResponse) => void,
  refuseHost: (req: IncomingMessage, res: ServerResponse) => void,
): { server: ProxyHttpServer; connections: Http2Connections } {
  const options = { ...CLIENT_LIMITS, ServerResponse: ProxyResponse };
  const minVersion = deps.tlsMinVersion ?? 'TLSv1.2';
  const tls = {
    minVersion,
    SNICallback(servername: string, done: (err: Error | null, context?: SecureContext) => void) {
      const context = sniContext(deps.tables.current()?.gatewayTls, servername);
      if (context instanceof Error) done(context);
      else done(null, context);
    },
  };
  let secure: Http2Listener['server'] | HttpsServer<typeof IncomingMessage, typeof ProxyResponse>;
  let connections: Http2Connections;
  if (deps.http2) {
    const http2 = createHttp2Listener(tls, options, handle, refuseHost);
    secure = http2.server;
    connections = http2;
  } else {
    const https = createHttpsServer({ ...options, ...tls, ALPNProtocols: ['http/1.1'] }, handle);
    secure = https;
    connections = { goAway() {}, drain: () => https.closeIdleConnections(), cut: () => https.closeAllConnections() };
  }
  let fallback: GatewayTlsContexts['fallback'] | null = null;
  // Before node's own listener wraps the socket in TLS with the default context: that context follows the table.
  secure.prependListener('connection', () => {
    const now = deps.tables.current()?.gatewayTls?.fallback;
    if (now === fallback) return;
    fallback = now;
    secure.setSecureContext(now ? { ...now, minVersion } : { minVersion });
  });
  return { server: secure, connections };
}
