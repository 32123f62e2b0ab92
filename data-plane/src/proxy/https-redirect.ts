/**
 * PROXY_HTTP_REDIRECT_PORT: a plain-HTTP listener beside the HTTPS proxy listener that answers every
 * request with 308 Permanent Redirect to the same host, path and query over HTTPS on its default port
 * (308 rather than 301: a POST stays a POST). Nothing is routed or forwarded here. The Location is built
 * from the Host header only once it is a valid host name or IP literal (else 400 BAD_REQUEST_HOST), so a
 * client cannot inject anything; the path is the request target node's parser already checked.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { gatewayBody } from '#proto/errors';
import { locationOf, parseAuthority } from '#proto/location';
import { requestIdOf } from './headers.js';

/** `https://<host without port><path?query>`, or null when the Host header is missing or not a host. */
export function httpsLocation(host: string | undefined, target: string | undefined): string | null {
  const authority = parseAuthority(host);
  if (authority === null) return null;
  let pathAndQuery = target || '/';
  if (!pathAndQuery.startsWith('/')) {
    // absolute-form (`http://h/p?q`), as a client configured to use a proxy sends: its path and query
    try {
      const url = new URL(pathAndQuery);
      pathAndQuery = url.pathname + url.search;
    } catch {
      return null;
    }
  }
  return locationOf('https', authority.hostname, null, pathAndQuery);
}

/** Slow clients may not hold it open either: headers as on the proxy listener; the whole request in 1 min, as no body streams anywhere from here. */
const LIMITS = { headersTimeout: 30_000, requestTimeout: 60_000, maxHeaderSize: 16 * 1024 };

export function createHttpsRedirectServer(): Server {
  return createServer(LIMITS, (req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req.headers['x-request-id']);
    const location = httpsLocation(req.headers.host, req.url);
    if (location === null) {
      const body = gatewayBody('BAD_REQUEST_HOST');
      res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': requestId }).end(body);
      return;
    }
    res.writeHead(308, { location, 'content-length': '0', 'x-request-id': requestId }).end();
  });
}
