/**
 * What a client request's framing says, for HTTP/1.1 and HTTP/2 alike (proxy/http2.ts turns an h2 request into
 * an HTTP/1.1-looking one; these are the facts that cannot be made to look alike).
 */
import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import type { TLSSocket } from 'node:tls';

/** Whether a request came over HTTP/2 (node's compatibility API objects stand in for node:http's). */
export function isHttp2(req: IncomingMessage): boolean {
  return req.httpVersionMajor === 2;
}

/** The scheme the client used to reach the proxy listener (X-Forwarded-Proto's value, a redirect's default). */
export function listenerScheme(req: IncomingMessage): 'http' | 'https' {
  return (req.socket as TLSSocket).encrypted ? 'https' : 'http';
}

/**
 * Whether a request has a body: HTTP/1.1 says so with Content-Length or Transfer-Encoding; an h2 request may
 * send DATA frames without Content-Length, and has no body when its headers ended the stream.
 * (A Content-Length is exact in both: node's parser and nghttp2 refuse a body of any other length.)
 */
export function requestHasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined && length !== '0') return true;
  if (!isHttp2(req)) return req.headers['transfer-encoding'] !== undefined;
  return length === undefined && !(req as unknown as Http2ServerRequest).stream.endAfterHeaders;
}

/** Whether the client has left: its connection is gone, or for HTTP/2 its stream (a RST_STREAM leaves the connection up). */
export function clientGone(req: IncomingMessage): boolean {
  return isHttp2(req) ? (req as unknown as Http2ServerRequest).stream.destroyed : req.socket.destroyed;
}
