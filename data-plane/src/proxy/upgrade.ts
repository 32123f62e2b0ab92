/**
 * WebSocket through the proxy listener (docs/proxy.md "Proxy behaviour"): after the request has been matched,
 * authorised and rewritten as any other (upgrade-request.ts), the handshake goes to the target with undici's
 * upgrade, and on the target's `101` the two connections are joined byte for byte until either side
 * closes. Any other answer of the target is relayed as it is (a 401 stays a 401). Here: the raw-socket
 * side of that, since an upgraded request has no ServerResponse.
 */
import { STATUS_CODES, validateHeaderName, validateHeaderValue, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { GatehouseError } from '#proto/errors';
import { errors, parseHeaders } from './undici.js';

/** First TCP keep-alive probe after this much silence on a joined connection. */
const KEEPALIVE_MS = 60_000;

/** `GET` with `Upgrade: websocket` (RFC 6455 §4.1; the token is case-insensitive): the one upgrade proxied. */
export function isWebSocketHandshake(req: { method?: string; headers: IncomingHttpHeaders }): boolean {
  return req.method === 'GET' && /^websocket$/i.test(req.headers.upgrade ?? '');
}

/**
 * Writes a whole response to a connection that has no ServerResponse (an upgrade request), then closes
 * it: the HTTP parser has let go of that connection, so it carries no further request. A header that
 * node would refuse (a name or value with forbidden characters) is left out rather than written raw.
 */
export function answerOnSocket(socket: Duplex, status: number, headers: OutgoingHttpHeaders, body: string | Buffer = ''): void {
  if (socket.destroyed) return;
  const head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${headerLines(headers, FRAMING)}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n`;
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), Buffer.isBuffer(body) ? body : Buffer.from(body)]));
}

/** Set by answerOnSocket itself: the body's length, and a connection that closes after it. */
const FRAMING = new Set(['content-length', 'connection', 'transfer-encoding']);

/** `name: value\r\n` for each header (each value of a list), but those named in `skip` and those node would refuse. */
function headerLines(headers: OutgoingHttpHeaders, skip?: ReadonlySet<string>): string {
  let lines = '';
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || skip?.has(name.toLowerCase())) continue;
    for (const one of Array.isArray(value) ? value : [String(value)]) {
      try {
        validateHeaderName(name);
        validateHeaderValue(name, one);
      } catch {
        continue;
      }
      lines += `${name}: ${one}\r\n`;
    }
  }
  return lines;
}

/** Writes the `101 Switching Protocols` head; the connection then belongs to the WebSocket. */
export function switchProtocols(socket: Duplex, headers: OutgoingHttpHeaders): void {
  socket.write(`HTTP/1.1 101 Switching Protocols\r\n${headerLines(headers)}\r\n`, 'latin1');
}

/**
 * Joins the client's and the target's connections: bytes flow both ways as they come, a side that ends
 * ends the other, and an error or a close on either destroys both. `head`: what the client sent after its
 * handshake, already read by node's parser. Resolves once both are closed.
 */
export function join(client: Duplex, upstream: Duplex, head: Buffer): Promise<void> {
  // No idle timeout (a WebSocket may be quiet for hours, its application pings); TCP keep-alive instead
  // finds a peer that vanished without closing, so a dead connection does not stay joined forever.
  for (const socket of [client, upstream]) (socket as Partial<Socket>).setKeepAlive?.(true, KEEPALIVE_MS);
  if (head.length > 0) upstream.write(head);
  client.pipe(upstream);
  upstream.pipe(client);
  const closed = (socket: Duplex) => new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())));
  const destroyBoth = () => {
    client.destroy();
    upstream.destroy();
  };
  client.once('error', destroyBoth).once('close', destroyBoth);
  upstream.once('error', destroyBoth).once('close', destroyBoth);
  return Promise.all([closed(client), closed(upstream)]).then(() => undefined);
}

/** What the target answered to a handshake. */
export type HandshakeResult =
  | { kind: 'upgraded'; headers: IncomingHttpHeaders; socket: Duplex }
  | { kind: 'response'; status: number; headers: IncomingHttpHeaders; body: Buffer };

/** A refused handshake's body is relayed up to this size (an error page, not a download); past it the answer is a 502. */
const MAX_RELAYED_BODY = 64 * 1024;

/**
 * Sends the handshake to the target through `pool` (its dial timeout and TLS mode) and resolves with the
 * target's answer; rejects with a GatehouseError (UPSTREAM_UNREACHABLE / UPSTREAM_TIMEOUT).
 */
export function handshake(
  pool: Dispatcher,
  request: { path: string; headers: readonly string[]; headersTimeoutMs: number },
  abortOnClose: Duplex,
): Promise<HandshakeResult> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    let abort: ((reason: Error) => void) | null = null;
    const clientGone = () => abort?.(new errors.RequestAbortedError());
    abortOnClose.once('close', clientGone);
    const done = () => abortOnClose.off('close', clientGone);
    const handler: Dispatcher.DispatchHandler = {
      onConnect(abortRequest) {
        abort = abortRequest;
        if (abortOnClose.destroyed) abortRequest(new errors.RequestAbortedError());
      },
      onUpgrade(_statusCode, rawHeaders, socket) {
        done();
        resolve({ kind: 'upgraded', headers: parseHeaders((rawHeaders ?? []) as Buffer[]) as IncomingHttpHeaders, socket });
      },
      onHeaders(statusCode, rawHeaders) {
        status = statusCode;
        headers = parseHeaders(rawHeaders as Buffer[]) as IncomingHttpHeaders;
        return true;
      },
      onData(chunk) {
        size += chunk.length;
        if (size > MAX_RELAYED_BODY) {
          abort?.(new errors.ResponseExceededMaxSizeError());
          return false;
        }
        chunks.push(chunk);
        return true;
      },
      onComplete() {
        done();
        resolve({ kind: 'response', status, headers, body: Buffer.concat(chunks) });
      },
      onError(err) {
        done();
        reject(
          err instanceof errors.HeadersTimeoutError
            ? new GatehouseError('UPSTREAM_TIMEOUT', 'upstream did not answer the WebSocket handshake in time', { cause: err })
            : new GatehouseError('UPSTREAM_UNREACHABLE', `WebSocket handshake failed: ${err.message}`, { cause: err }),
        );
      },
    };
    pool.dispatch(
      { method: 'GET', path: request.path, headers: request.headers as string[], upgrade: 'websocket', headersTimeout: request.headersTimeoutMs },
      handler,
    );
  });
}
