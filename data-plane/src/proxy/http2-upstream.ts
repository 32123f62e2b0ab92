/**
 * HTTP/2 to an upstream (`proxy.upstreams.protocol: "http2"`, docs/proxy.md "gRPC and HTTP/2 upstreams"): h2c with prior
 * knowledge for an http:// target, h2 by ALPN for an https:// one; each request is a stream on a connection to
 * the origin (more than one when the server's stream limit is reached). A Dispatcher keeping undici's handler
 * contract, so forward.ts, the forward hooks and the health probes drive it as they drive an undici Pool.
 *
 * Not undici's own h2 client (Pool with allowH2 / useH2c): undici 7.30 (lib/dispatcher/client-h2.js) completes
 * the request when the trailers frame arrives, dropping the body bytes still buffered behind a paused stream, and
 * a gRPC call's status travels in those trailers behind its last message. Here the trailers are kept and handed
 * over at the stream's end, after every body byte.
 *
 * | HTTP/1.1 request as the proxy builds it     | on the h2 stream (RFC 9113 §8.2.2, §8.3.1)                      |
 * |---------------------------------------------|-----------------------------------------------------------------|
 * | Host                                        | `:authority`                                                    |
 * | Connection, Keep-Alive, Transfer-Encoding…  | never sent (already dropped by headers.ts; dropped again here)  |
 * | TE                                          | always `TE: trailers`: the gateway reads trailers (gRPC needs it) |
 * | a body of unknown length                    | DATA frames until END_STREAM                                    |
 * | Upgrade (WebSocket)                         | refused: no RFC 8441 extended CONNECT to upstreams              |
 */
import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type IncomingHttpStatusHeader,
  type OutgoingHttpHeaders,
} from 'node:http2';
import type { Readable } from 'node:stream';
import type { SecureContext } from 'node:tls';
import type { Dispatcher as UndiciDispatcher } from 'undici';
import { CONNECTION_SPECIFIC } from './http2.js';
import { Dispatcher, errors, wrapHandler } from './undici.js';

const { NGHTTP2_CANCEL } = constants;

/** Not sent on an h2 stream (RFC 9113 §8.2.2), or sent as a pseudo-header (`host`); TE is set below. */
const NOT_SENT = new Set([...CONNECTION_SPECIFIC, 'te', 'host']);

/** A connection without streams for this long is closed (undici's HTTP/1.1 pools keep an idle one 4 s). */
const IDLE_SESSION_MS = 60_000;

/**
 * Flow control. A stream's window bounds what the gateway buffers of one response its client is not reading
 * (256 KiB; node's default is 64 KiB, a ceiling of 64 KiB per round trip on one stream). The connection's
 * window is no such bound: node acknowledges a paused stream's bytes at the connection level as they arrive
 * (checked: a paused stream holding its whole window left the connection's window untouched), so it is only a
 * ceiling on all the streams together per round trip, and node's 64 KiB would be 64 MB/s at 1 ms.
 */
const STREAM_WINDOW = 256 * 1024;
const CONNECTION_WINDOW = 16 * 1024 * 1024;
/**
 * MB a connection may hold in frames not yet sent and the like (node's maxSessionMemory, default 10): past it
 * node refuses new streams with ENHANCE_YOUR_CALM. Every request to the origin shares the connection, each
 * upload with up to a writable's high-water mark (16 KiB) queued: 10 MB was about 640 uploads in flight.
 */
const SESSION_MEMORY_MB = 64;

export interface Http2UpstreamOptions {
  dialTimeoutMs: number;
  /** Bound on the wait for response headers and between two body chunks (the pools' UPSTREAM_IDLE_TIMEOUT_MS). */
  idleTimeoutMs: number;
  insecureSkipVerify: boolean;
  secureContext?: SecureContext;
}

type Headers = UndiciDispatcher.DispatchOptions['headers'];

/** undici's header forms (flat list, entries, object) as h2 request headers. */
function requestHeaders(method: string, path: string, scheme: string, defaultAuthority: string, headers: Headers): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':method': method, ':path': path, ':scheme': scheme };
  let authority = defaultAuthority;
  const add = (rawName: string, value: string | string[] | number | undefined): void => {
    if (value === undefined) return;
    const name = rawName.toLowerCase();
    if (name === 'host') authority = String(value);
    if (NOT_SENT.has(name)) return;
    const previous = out[name];
    out[name] = previous === undefined ? (value as string) : ([] as (string | number)[]).concat(previous as string, value).map(String);
  };
  if (Array.isArray(headers)) {
    if (Array.isArray(headers[0])) for (const [name, value] of headers as unknown as [string, string][]) add(name, value);
    else for (let i = 0; i < headers.length; i += 2) add(String(headers[i]), String(headers[i + 1]));
  } else if (headers && typeof headers === 'object') {
    for (const [name, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) add(name, value);
  }
  out[':authority'] = authority;
  out.te = 'trailers';
  return out;
}

/** A response's (or trailers') fields without pseudo-headers, in the shape undici hands its handlers. */
function responseFields(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && name.charCodeAt(0) !== 0x3a /* ':' */) out[name] = value;
  }
  return out;
}

function noop(): void {}

/** One request's stream; also its DispatchController (pause/resume/abort from the handler). */
class Exchange implements UndiciDispatcher.DispatchController {
  aborted = false;
  paused = false;
  reason: Error | null = null;
  private stream: ClientHttp2Stream | null = null;
  private body: Readable | null = null;
  private responded = false;
  private finished = false;
  private trailers: Record<string, string | string[]> = {};

  constructor(
    private readonly handler: UndiciDispatcher.DispatchHandler,
    private readonly idleTimeoutMs: number,
  ) {}

  abort(reason: Error): void {
    if (this.aborted || this.finished) return;
    this.aborted = true;
    this.reason = reason;
    this.fail(reason);
  }

  pause(): void {
    this.paused = true;
    this.stream?.pause();
  }

  resume(): void {
    this.paused = false;
    this.stream?.resume();
  }

  /** Ends the exchange with `err` (once): the stream is cancelled and the handler told. */
  fail(err: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.release();
    if (this.stream && !this.stream.destroyed) this.stream.close(NGHTTP2_CANCEL);
    this.handler.onResponseError?.(this, err);
  }

  private release(): void {
    if (this.body && this.stream) this.body.unpipe(this.stream);
    this.body = null;
  }

  start(
    session: ClientHttp2Session,
    headers: OutgoingHttpHeaders,
    body: UndiciDispatcher.DispatchOptions['body'],
    headersTimeoutMs: number | undefined,
  ): ClientHttp2Stream {
    const hasBody = body !== null && body !== undefined;
    const stream = session.request(headers, { endStream: !hasBody });
    this.stream = stream;
    stream.setTimeout(headersTimeoutMs ?? this.idleTimeoutMs, () =>
      this.fail(this.responded ? new errors.BodyTimeoutError('upstream body idle') : new errors.HeadersTimeoutError('upstream response headers timed out')),
    );
    stream.on('response', (fields: IncomingHttpHeaders & IncomingHttpStatusHeader) => this.onResponse(fields));
    stream.on('trailers', (fields: IncomingHttpHeaders) => {
      this.trailers = responseFields(fields);
    });
    stream.on('end', () => this.onEnd());
    // A stream cancelled because its connection failed (refused, dial timeout, TLS) carries that failure as its cause.
    stream.on('error', (err: NodeJS.ErrnoException) => this.fail(err.code === 'ERR_HTTP2_STREAM_CANCEL' && err.cause instanceof Error ? err.cause : err));
    stream.on('close', () => {
      // A reset (RST_STREAM) or a connection lost before the end emits 'close' alone.
      if (!this.finished) this.fail(new errors.SocketError(`upstream stream closed before the response ended (code ${stream.rstCode ?? 'none'})`));
    });
    if (!hasBody) return stream;
    if (typeof (body as Readable).pipe === 'function') {
      const readable = body as Readable;
      this.body = readable;
      readable.once('error', (err: Error) => this.fail(err));
      readable.pipe(stream);
    } else {
      stream.end(body as Buffer | string);
    }
    return stream;
  }

  private onResponse(fields: IncomingHttpHeaders & IncomingHttpStatusHeader): void {
    if (this.finished) return;
    const status = Number(fields[':status']);
    this.responded = true;
    this.stream!.setTimeout(this.idleTimeoutMs);
    this.handler.onResponseStart?.(this, status, responseFields(fields), '');
    if (this.finished) return;
    this.stream!.on('data', (chunk: Buffer) => {
      if (!this.finished) this.handler.onResponseData?.(this, chunk);
    });
    if (this.paused) this.stream!.pause();
  }

  private onEnd(): void {
    if (this.finished) return;
    if (!this.responded) {
      this.fail(new errors.SocketError('upstream stream ended without a response'));
      return;
    }
    this.finished = true;
    this.release();
    this.handler.onResponseEnd?.(this, this.trailers);
  }
}

/** One connection to the origin, with the streams it carries and how many it may. */
interface Connection {
  session: ClientHttp2Session;
  /** Streams open on it (node's session.state does not count them). */
  open: number;
  /** The server's SETTINGS_MAX_CONCURRENT_STREAMS once known; until then the origin's last known one. */
  limit: number;
}

/**
 * Streams put on the first connection to an origin before the server's SETTINGS say how many it takes (later
 * connections start from what the earlier ones were told): RFC 9113 §6.5.2 advises servers to allow at least
 * 100. A burst beyond the real limit in that first half round trip waits in nghttp2's queue.
 */
const FIRST_LIMIT = 100;
/**
 * Connections to one origin at most. A stream beyond a connection's limit waits in nghttp2's queue until one
 * ends, which for long-lived calls (a gRPC watch) is never: another connection is opened instead, as Envoy does.
 */
const MAX_CONNECTIONS = 32;

/** The h2 counterpart of an undici Pool for one origin (upstream-pools.ts keys them as it keys the pools). */
export class Http2Upstream extends Dispatcher {
  /** Open connections, oldest first: streams fill them in order, so extra ones idle out when the load falls. */
  private readonly connections: Connection[] = [];
  private readonly scheme: string;
  private readonly authority: string;
  private isClosed = false;
  /** The last SETTINGS_MAX_CONCURRENT_STREAMS this origin announced, for the next connection's start. */
  private knownLimit = FIRST_LIMIT;

  constructor(
    private readonly origin: string,
    private readonly options: Http2UpstreamOptions,
  ) {
    super();
    const url = new URL(origin);
    this.scheme = url.protocol === 'https:' ? 'https' : 'http';
    this.authority = url.host;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  override dispatch(opts: UndiciDispatcher.DispatchOptions, rawHandler: UndiciDispatcher.DispatchHandler): boolean {
    const handler = wrapHandler(rawHandler);
    const exchange = new Exchange(handler, this.options.idleTimeoutMs);
    handler.onRequestStart?.(exchange, {});
    if (exchange.aborted) return true;
    if (this.isClosed) exchange.fail(new errors.ClientClosedError());
    else if (opts.upgrade) exchange.fail(new errors.NotSupportedError('upgrades are not proxied to an HTTP/2 upstream'));
    else {
      try {
        const headers = requestHeaders(opts.method, opts.path, this.scheme, this.authority, opts.headers);
        const connection = this.connectionWithRoom();
        const stream = exchange.start(connection.session, headers, opts.body, opts.headersTimeout ?? undefined);
        connection.open++;
        stream.once('close', () => void connection.open--);
      } catch (err) {
        exchange.fail(err as Error);
      }
    }
    return true;
  }

  /** The first connection with room for a stream; a new one when none has; past MAX_CONNECTIONS, the least full. */
  private connectionWithRoom(): Connection {
    let leastFull: Connection | null = null;
    for (const connection of this.connections) {
      // Closing or failed, before its 'close' event took it out of the list.
      if (connection.session.closed || connection.session.destroyed) continue;
      if (connection.open < connection.limit) return connection;
      if (!leastFull || connection.open - connection.limit < leastFull.open - leastFull.limit) leastFull = connection;
    }
    return leastFull && this.connections.length >= MAX_CONNECTIONS ? leastFull : this.openConnection();
  }

  private openConnection(): Connection {
    const { dialTimeoutMs, insecureSkipVerify, secureContext } = this.options;
    const session = connect(this.origin, {
      ...(insecureSkipVerify && { rejectUnauthorized: false }),
      ...(secureContext && { secureContext }),
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
      maxSessionMemory: SESSION_MEMORY_MB,
    });
    const connection: Connection = { session, open: 0, limit: this.knownLimit };
    this.connections.push(connection);
    const dialTimer = setTimeout(() => session.destroy(new errors.ConnectTimeoutError('upstream connect timed out')), dialTimeoutMs);
    // After a GOAWAY it takes no new stream; those it carries finish on it.
    const forget = (): void => {
      clearTimeout(dialTimer);
      const at = this.connections.indexOf(connection);
      if (at !== -1) this.connections.splice(at, 1);
    };
    session.once('connect', () => {
      clearTimeout(dialTimer);
      session.setLocalWindowSize(CONNECTION_WINDOW);
    });
    session.on('remoteSettings', (settings) => {
      connection.limit = this.knownLimit = settings.maxConcurrentStreams ?? FIRST_LIMIT;
    });
    session.once('goaway', forget);
    session.once('close', forget);
    // Each stream gets the session's error as its own; the session's copy has nobody else to go to.
    session.on('error', noop);
    session.setTimeout(IDLE_SESSION_MS, () => {
      if (connection.open === 0) session.close();
    });
    return connection;
  }

  override close(): Promise<void> {
    this.isClosed = true;
    const open = this.connections.splice(0);
    return Promise.all(open.map(({ session }) => new Promise<void>((resolve) => (session.closed ? resolve() : session.close(() => resolve()))))).then(
      () => undefined,
    );
  }

  override destroy(): Promise<void> {
    this.isClosed = true;
    for (const { session } of this.connections.splice(0)) session.destroy();
    return Promise.resolve();
  }
}
