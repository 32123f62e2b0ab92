/**
 * A real node:http upstream on loopback that records every request it receives (method, URL,
 * headers, body length and sha256), so tests assert on what actually reached the upstream.
 * What it answers is chosen per request by a behaviour that tests can switch at any time.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { listen } from '#proto/listen';
import { pollUntil } from './poll-until.js';

export interface RecordedRequest {
  method: string;
  /** Path and query exactly as received on the request line. */
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  bodyLength: number;
  bodySha256: string;
}

export type UpstreamBehaviour =
  /** JSON `{"upstream": name, "method", "url"}` (the default) with header `x-upstream: name`. */
  | { kind: 'fixed'; status?: number; body?: string; headers?: Record<string, string> }
  /** JSON of the recorded request (method, url, headers, bodyLength, bodySha256). */
  | { kind: 'echo' }
  /** `bytes` pseudo-random bytes; their sha256 is `Upstream.bigBodySha256(bytes)`. */
  | { kind: 'big'; bytes: number }
  /** Answers as `answer` does (default fixed) after `ms`. */
  | { kind: 'delay'; ms: number; answer?: UpstreamBehaviour }
  /** Reads the request and never answers. */
  | { kind: 'hang' }
  /**
   * Declares a body of `declared` bytes (Content-Length, or chunked with `chunked`), sends `sent` of them,
   * then destroys its socket: an upstream that dies mid-body.
   */
  | { kind: 'cut'; declared: number; sent: number; chunked?: boolean };

export interface Upstream {
  readonly name: string;
  readonly port: number;
  /** `http://127.0.0.1:<port>` (`https://` when started with a certificate) */
  readonly url: string;
  /** `127.0.0.1:<port>`: the Host header a proxy must send when it does not preserve the client's. */
  readonly hostHeader: string;
  /** Every request received, oldest first. */
  readonly requests: readonly RecordedRequest[];
  /** Requests whose body never ended (the sender aborted them), with the body bytes that did arrive. */
  readonly aborted: readonly RecordedRequest[];
  last(): RecordedRequest | undefined;
  setBehaviour(behaviour: UpstreamBehaviour | ((req: RecordedRequest) => UpstreamBehaviour)): void;
  /** Forgets the recorded requests. */
  reset(): void;
  waitForRequests(count: number, timeoutMs?: number): Promise<readonly RecordedRequest[]>;
  /** sha256 of the body served by behaviour `{kind: 'big', bytes}`. */
  bigBodySha256(bytes: number): string;
  close(): Promise<void>;
}

export interface UpstreamOptions {
  /** Serve HTTPS with this PEM certificate and key (e.g. one the gateway does not trust). */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Listen on this address instead of 127.0.0.1 (e.g. an EndpointSlice's, which may not be loopback). */
  host?: string;
}

export async function startUpstream(name = 'upstream', initial: UpstreamBehaviour = { kind: 'fixed' }, options: UpstreamOptions = {}): Promise<Upstream> {
  const requests: RecordedRequest[] = [];
  const aborted: RecordedRequest[] = [];
  let choose: (req: RecordedRequest) => UpstreamBehaviour = () => initial;
  const bigBodies = new Map<number, { body: Buffer; sha256: string }>();

  const bigBody = (bytes: number): { body: Buffer; sha256: string } => {
    let entry = bigBodies.get(bytes);
    if (!entry) {
      const body = randomBytes(bytes);
      entry = { body, sha256: createHash('sha256').update(body).digest('hex') };
      bigBodies.set(bytes, entry);
    }
    return entry;
  };

  const answer = (behaviour: UpstreamBehaviour, recorded: RecordedRequest, res: ServerResponse): void => {
    switch (behaviour.kind) {
      case 'fixed': {
        const body = behaviour.body ?? JSON.stringify({ upstream: name, method: recorded.method, url: recorded.url });
        res.writeHead(behaviour.status ?? 200, { 'content-type': 'application/json', 'x-upstream': name, ...behaviour.headers });
        res.end(body);
        return;
      }
      case 'echo':
        res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': name });
        res.end(JSON.stringify(recorded));
        return;
      case 'big':
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-upstream': name });
        res.end(bigBody(behaviour.bytes).body);
        return;
      case 'delay': {
        const timer = setTimeout(() => answer(behaviour.answer ?? { kind: 'fixed' }, recorded, res), behaviour.ms);
        res.on('close', () => clearTimeout(timer));
        return;
      }
      case 'hang':
        return;
      case 'cut': {
        const framing = behaviour.chunked ? {} : { 'content-length': String(behaviour.declared) };
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-upstream': name, ...framing });
        res.flushHeaders();
        res.write(Buffer.alloc(behaviour.sent, 0x61), () => setTimeout(() => res.socket?.destroy(), 50));
        return;
      }
    }
  };

  const handler: RequestListener = (req: IncomingMessage, res: ServerResponse) => {
    const hash = createHash('sha256');
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      length += chunk.length;
    });
    const record = (): RecordedRequest => ({
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      bodyLength: length,
      bodySha256: hash.digest('hex'),
    });
    req.on('end', () => {
      const recorded = record();
      requests.push(recorded);
      answer(choose(recorded), recorded, res);
    });
    req.on('close', () => {
      if (!req.complete) aborted.push(record());
    });
  };
  const server: Server = options.tls ? createHttpsServer(options.tls, handler) : createServer(handler);
  // Never let the upstream's own timeouts interfere with the gateway timeout tests.
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  const host = options.host ?? '127.0.0.1';
  const port = await listen(server, 0, host);
  const authority = `${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    name,
    port,
    url: `${options.tls ? 'https' : 'http'}://${authority}`,
    hostHeader: authority,
    requests,
    aborted,
    last: () => requests[requests.length - 1],
    setBehaviour(behaviour) {
      choose = typeof behaviour === 'function' ? behaviour : () => behaviour;
    },
    reset() {
      requests.length = 0;
      aborted.length = 0;
    },
    waitForRequests(count, timeoutMs = 5_000) {
      return pollUntil(async () => (requests.length >= count ? requests : undefined), {
        what: `upstream ${name} to receive ${count} request(s) (has ${requests.length})`,
        timeoutMs,
      });
    },
    bigBodySha256: (bytes) => bigBody(bytes).sha256,
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
