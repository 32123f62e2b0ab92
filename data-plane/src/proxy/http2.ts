/**
 * HTTP/2 on the proxy listener (docs/proxy.md "Proxy behaviour", HTTP/2): over TLS offered by ALPN beside HTTP/1.1 on the same
 * port, so a client that speaks both gets h2 and any other gets the HTTP/1.1 listener of old; in plain text (h2c) to a
 * client that opens with the HTTP/2 preface (acceptH2c). Upstreams are still
 * spoken to over HTTP/1.1: an h2 request is turned into an HTTP/1.1 one here, once, and the proxy's request
 * path (dispatch.ts) then serves it as it serves any other, through node's compatibility API
 * (Http2ServerRequest / Http2ServerResponse, which node keeps duck-compatible with IncomingMessage /
 * ServerResponse). What differs is decided in this file and in the few places that test `isHttp2`:
 *
 * | HTTP/2 (RFC 9113)                                   | what the proxy does                                     |
 * |-----------------------------------------------------|---------------------------------------------------------|
 * | `:authority` instead of Host (§8.3.1)               | Host = `:authority`; a Host naming another host, or no  |
 * |                                                     | host at all, is 400 (as HTTP/1.1 without Host)          |
 * | pseudo-headers `:method :path :scheme :authority`   | not forwarded                                           |
 * | Cookie split into several fields (§8.2.3)          | joined with "; " into one Cookie for the upstream        |
 * | a body without Content-Length (DATA until END_STREAM)| forwarded chunked; body_limit counts it                 |
 * | no connection-specific response headers (§8.2.2)   | hop-by-hop ones are never set (no `Connection: close`)   |
 * | graceful close is GOAWAY                            | drain sends GOAWAY; streams in flight finish             |
 * | answering before the upload ends                    | node resets the stream with NO_ERROR after the answer   |
 * | a response cut mid-body (the upstream died)         | RST_STREAM INTERNAL_ERROR, never NO_ERROR (§6.4)        |
 */
import { Server as HttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  constants,
  createSecureServer,
  createServer,
  Http2ServerRequest,
  Http2ServerResponse,
  type Http2SecureServer,
  type Http2Server,
  type SecureServerOptions,
  type ServerHttp2Session,
} from 'node:http2';
import type { Socket } from 'node:net';
import { isHttp2 } from '../plugins/request-framing.js';
import type { ProxyResponse } from './forward.js';

/** What a request's headers, raw list included, look like to the HTTP/1.1 side. */
function http1Fields(headers: Record<string, string | string[] | undefined>, raw: readonly string[]): string[] {
  const out: string[] = [];
  let cookies: string[] | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.charCodeAt(0) === 0x3a /* ':' pseudo-header */) continue;
    if (name === 'cookie') (cookies ??= []).push(raw[i + 1]!);
    else out.push(name, raw[i + 1]!);
  }
  if (cookies) out.push('cookie', cookies.join('; '));
  const authority = headers[':authority'];
  if (!headers.host && typeof authority === 'string') {
    headers.host = authority;
    out.push('host', authority);
  }
  return out;
}

/** RFC 9113 §8.2.2: what an h2 message must not carry. */
export const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * An h2 request as the HTTP/1.1 side sees it: `rawHeaders` without pseudo-headers and with one Cookie,
 * `headers.host` from `:authority`. (node's http2 folds names to lower case, so `cookie` is the only spelling.)
 */
export class ProxyHttp2Request extends Http2ServerRequest {
  /** Host and `:authority` name different hosts, or neither is there: the request is answered 400 and goes nowhere. */
  readonly badHost: boolean;

  constructor(...args: ConstructorParameters<typeof Http2ServerRequest>) {
    const [stream, headers, options, raw] = args;
    const host = headers.host || undefined;
    const authority = headers[':authority'] || undefined;
    const bad = host === undefined ? authority === undefined : authority !== undefined && host.toLowerCase() !== authority.toLowerCase();
    super(stream, headers, options, http1Fields(headers, raw));
    this.badHost = bad;
  }
}

/**
 * The proxy listener's h2 responses: the same per-request slots as ProxyResponse (forward.ts), and the
 * body bytes written, which the access log reports (the connection's byte counters are shared by its streams).
 */
export class ProxyHttp2Response extends Http2ServerResponse<ProxyHttp2Request> {
  onClientClose: (() => void) | null = null;
  access: ProxyResponse['access'] = null;
  bytesWritten = 0;
  sent: ProxyResponse['sent'] = this;
  deadline: ProxyResponse['deadline'] = null;

  /**
   * HTTP/1.1's connection-specific headers are a protocol error in h2 (node throws on them): the proxy's own
   * (`Connection: close` while draining or after a refused upload) and any a plugin adds are dropped here.
   */
  override writeHead(statusCode: number, ...rest: unknown[]): this {
    const headers = rest[rest.length - 1];
    if (headers !== null && typeof headers === 'object') {
      for (const name of Object.keys(headers)) if (CONNECTION_SPECIFIC.has(name.toLowerCase())) delete (headers as Record<string, unknown>)[name];
    }
    (super.writeHead as (...args: unknown[]) => void)(statusCode, ...rest);
    return this;
  }

  override write(chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
    this.count(chunk, encoding);
    return (super.write as (...args: unknown[]) => boolean)(chunk, encoding, callback);
  }

  override end(chunk?: unknown, encoding?: unknown, callback?: unknown): this {
    this.count(chunk, encoding);
    (super.end as (...args: unknown[]) => void)(chunk, encoding, callback);
    return this;
  }

  /**
   * A response cut before its end (an upstream that died mid-body) resets the stream with INTERNAL_ERROR: node's own
   * destroy() resets it with NO_ERROR, which a client reads as a complete, truncated body (RFC 9113 §6.4).
   */
  override destroy(err?: Error): this {
    if (!this.stream.destroyed && !this.writableFinished) this.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    super.destroy(err);
    return this;
  }

  private count(chunk: unknown, encoding: unknown): void {
    if (typeof chunk === 'string') this.bytesWritten += Buffer.byteLength(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
    else if (chunk instanceof Uint8Array) this.bytesWritten += chunk.byteLength;
  }
}

const streamFinished = Object.getOwnPropertyDescriptor(Http2ServerResponse.prototype, 'writableFinished')!.get!;
Object.defineProperties(ProxyHttp2Response.prototype, {
  /**
   * As ServerResponse's, which the proxy reads to tell a complete answer from a cut one (the exchange's abort
   * of the upstream, the access log): node's compat takes the stream's, which a client's RST_STREAM also finishes.
   */
  writableFinished: {
    get(this: ProxyHttp2Response): boolean {
      return this.writableEnded && (streamFinished.call(this) as boolean);
    },
  },
  /** As ServerResponse's (the client left: nothing to answer); node's compat has none. */
  destroyed: {
    get(this: ProxyHttp2Response): boolean {
      return this.stream.destroyed;
    },
  },
});

export interface Http2Limits {
  /** Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** A connection with no frame for this long is closed with GOAWAY (its streams in flight finish). */
  idleTimeoutMs: number;
  /** A request body must have ended this long after the request started: HTTP/1.1's requestTimeout. */
  requestTimeoutMs: number;
}

/**
 * Streams per connection as nginx's and Kong's default (node's own is 2^32-1). A connection idle for a minute
 * is closed, as an HTTP/1.1 keep-alive one is after 5 s: h2 clients hold one connection for many requests.
 */
export const HTTP2_LIMITS: Http2Limits = { maxConcurrentStreams: 128, idleTimeoutMs: 60_000, requestTimeoutMs: 300_000 };

/**
 * The HTTP/1.1 fallback of an h2 server reads its settings from the server object, which http.Server fills in
 * from its options and Http2SecureServer leaves unset (no keep-alive timeout, no Host required, node's default
 * header size): copied from an http.Server made with the listener's options.
 */
const HTTP1_SETTINGS = [
  'keepAliveTimeout',
  'headersTimeout',
  'requestTimeout',
  'maxHeaderSize',
  'requireHostHeader',
  'maxRequestsPerSocket',
  'connectionsCheckingInterval',
  'rejectNonStandardBodyWrites',
] as const;

export interface Http2Listener extends Http2Connections {
  server: Http2SecureServer<typeof IncomingMessage, typeof ProxyResponse, typeof ProxyHttp2Request, typeof ProxyHttp2Response>;
}

/** A listener's connections, as the proxy's close() drives them. */
export interface Http2Connections {
  /**
   * The drain is announced and the listener still serves: GOAWAY on every h2 connection, and on one that arrives
   * meanwhile once its first stream opens (streams in flight finish; the client opens its next one elsewhere).
   */
  goAway(): void;
  /** Drain: GOAWAY on every connection (streams in flight finish); HTTP/1.1 connections close when idle. */
  drain(): void;
  /** The drain ran out of time: every connection is cut. */
  cut(): void;
}

type ProxyHttp2Server = Http2Server<typeof IncomingMessage, typeof ServerResponse, typeof ProxyHttp2Request, typeof ProxyHttp2Response>;

/** What node:http2 is told of the proxy's h2 sessions: its request and response classes and its limits. */
function sessionOptions(limits: Http2Limits, maxHeaderSize: number) {
  return {
    Http2ServerRequest: ProxyHttp2Request,
    Http2ServerResponse: ProxyHttp2Response,
    // The same bound as HTTP/1.1's header block (h2 counts 32 bytes more per field).
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: maxHeaderSize },
  };
}

/**
 * The h2 side of a listener, one for both that have one (TLS with ALPN, and plain text's h2c): the idle GOAWAY,
 * the upload timeout, the Host check, and drain (GOAWAY, also to a connection that arrives meanwhile) and cut of
 * its sessions. `handle` also gets what an h2 server passes on from HTTP/1.1 (the TLS listener's fallback).
 */
function serveHttp2(
  server: Http2SecureServer | ProxyHttp2Server,
  handle: (req: IncomingMessage, res: ProxyResponse) => void,
  refuse: (req: IncomingMessage, res: ServerResponse) => void,
  limits: Http2Limits,
): Http2Connections {
  const sessions = new Set<ServerHttp2Session>();
  let goingAway = false;
  let draining = false;
  server.on('session', (session: ServerHttp2Session) => {
    if (draining) {
      session.close();
      return;
    }
    if (goingAway) session.once('stream', () => session.close());
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.setTimeout(limits.idleTimeoutMs, () => session.close());
  });

  server.on('request', (req: IncomingMessage, res: ProxyResponse) => {
    if (!isHttp2(req)) {
      handle(req, res);
      return;
    }
    const request = req as unknown as ProxyHttp2Request;
    if (request.badHost) {
      refuse(req, res);
      return;
    }
    if (!request.stream.endAfterHeaders) {
      // HTTP/1.1's requestTimeout for an upload that never ends (the stream is cancelled, the upstream request with it).
      const timer = setTimeout(() => request.stream.close(constants.NGHTTP2_CANCEL), limits.requestTimeoutMs);
      const clear = () => clearTimeout(timer);
      req.once('end', clear);
      request.stream.once('close', clear);
    }
    handle(req, res);
  });

  return {
    goAway() {
      goingAway = true;
      for (const session of sessions) session.close();
    },
    drain() {
      draining = true;
      for (const session of sessions) session.close();
    },
    cut() {
      for (const session of sessions) session.destroy();
    },
  };
}

/**
 * The TLS proxy listener with h2 and HTTP/1.1 (ALPN). `handle` gets both kinds of request; an h2 one with a Host
 * that contradicts its `:authority`, or with neither, goes to `refuse` instead.
 */
export function createHttp2Listener(
  tls: SecureServerOptions,
  http1: { headersTimeout: number; requestTimeout: number; maxHeaderSize: number; ServerResponse: typeof ProxyResponse },
  handle: (req: IncomingMessage, res: ProxyResponse) => void,
  refuse: (req: IncomingMessage, res: ServerResponse) => void,
  limits: Http2Limits = HTTP2_LIMITS,
): Http2Listener {
  const server = createSecureServer({ ...tls, allowHTTP1: true, Http1ServerResponse: http1.ServerResponse, ...sessionOptions(limits, http1.maxHeaderSize) });
  const model = new HttpServer(http1);
  const settings = server as unknown as Record<string, unknown>;
  for (const name of HTTP1_SETTINGS) settings[name] = (model as unknown as Record<string, unknown>)[name];
  const h2 = serveHttp2(server, handle, refuse, limits);
  return {
    server,
    goAway: () => h2.goAway(),
    drain() {
      h2.drain();
      HttpServer.prototype.closeIdleConnections.call(server); // as node's own Http2SecureServer.closeIdleConnections does
    },
    cut() {
      h2.cut();
      HttpServer.prototype.closeAllConnections.call(server);
    },
  };
}

/** RFC 9113 §3.4: the first bytes of every HTTP/2 connection, which no HTTP/1.1 request line can start with. */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * h2c with prior knowledge (RFC 9113 §3.3) on the plain-text listener `http`, beside its HTTP/1.1: each new
 * connection's first bytes are read once, and a connection that opens with the HTTP/2 preface goes to an h2
 * server (the TLS listener's sessions: same classes, limits, drain and cut), any other to node:http.
 * The bytes read are put back (`unshift`) before either takes the socket: node:http's parser reads them from the
 * socket's buffer on resume, an Http2Session on its first tick (node's own path for a socket already read from).
 * Until it is told apart a connection is bounded by http's headersTimeout, and a drain closes it as an idle one.
 */
export function acceptH2c(
  http: HttpServer<typeof IncomingMessage, typeof ProxyResponse>,
  http1: { headersTimeout: number; maxHeaderSize: number },
  handle: (req: IncomingMessage, res: ProxyResponse) => void,
  refuse: (req: IncomingMessage, res: ServerResponse) => void,
  limits: Http2Limits = HTTP2_LIMITS,
): Http2Connections {
  const server: ProxyHttp2Server = createServer(sessionOptions(limits, http1.maxHeaderSize));
  const h2 = serveHttp2(server, handle, refuse, limits);
  // node:http takes a connection in its own 'connection' listener: this one goes first and calls it for HTTP/1.1.
  const [takeHttp1] = http.listeners('connection') as ((socket: Socket) => void)[];
  http.removeListener('connection', takeHttp1!);
  const sniffing = new Set<Socket>();
  http.on('connection', (socket: Socket) => {
    let seen: Buffer | null = null;
    const timer = setTimeout(() => socket.destroy(), http1.headersTimeout);
    const done = () => {
      clearTimeout(timer);
      sniffing.delete(socket);
      socket.removeListener('data', read);
      socket.removeListener('error', failed);
      socket.removeListener('end', failed);
      socket.removeListener('close', done);
    };
    // An error, or an end before the protocol is known (nothing whole was sent): nobody to answer.
    const failed = () => socket.destroy();
    function read(chunk: Buffer): void {
      seen = seen === null ? chunk : Buffer.concat([seen, chunk]);
      const length = Math.min(seen.length, PREFACE.length);
      const preface = seen.compare(PREFACE, 0, length, 0, length) === 0;
      if (preface && length < PREFACE.length) return; // the preface so far, split over TCP segments: wait for the rest
      done();
      socket.pause();
      socket.unshift(seen);
      if (preface) {
        server.emit('connection', socket);
      } else {
        takeHttp1!.call(http, socket);
        socket.resume();
      }
    }
    sniffing.add(socket);
    socket.on('data', read);
    socket.on('error', failed);
    socket.on('end', failed);
    socket.on('close', done);
  });
  return {
    goAway: () => h2.goAway(),
    drain() {
      h2.drain();
      for (const socket of sniffing) socket.destroy();
    },
    cut() {
      h2.cut();
      for (const socket of sniffing) socket.destroy();
    },
  };
}
