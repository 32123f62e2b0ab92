/**
 * The real proxy listener on an ephemeral loopback port, configured through the real apply path
 * (parseApiDefinition → toSnapshotMessage → holder.apply → compile → routing table), in front of
 * real node:http(s) upstreams. Assertions are on what the upstream received and the client got.
 */
import { parseTrustedProxies } from '../plugins/client-ip.js';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, request as rawRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { parseApiDefinition, parseOAuthServer } from '#proto/definition/index';
import { listen } from '#proto/listen';
import { toSnapshotMessage } from '#proto/snapshot/codec';
import { freePort } from '../../../test/helpers/free-port.js';
import { httpRequest } from '../../../test/helpers/http-request.js';
import { createMemoryTokenStore, type TokenStore } from '../auth/index.js';
import { createSnapshotHolder } from '../sync/snapshot-holder.js';
import { createTableBuilder } from '../table/index.js';
import { createProxyMetrics } from './proxy-metrics.js';
import { createProxyServer } from './proxy-server.js';
import { createUpstreamPools } from './upstream-pools.js';

const silent = pino({ enabled: false });

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  bodySha256: string;
  bodyLength: number;
}

interface Upstream {
  origin: string;
  port: number;
  received: Received[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

/** Answers 200 with a JSON echo of what it received, unless a handler says otherwise. */
const echo: Handler = (req, res, body) => {
  const text = JSON.stringify({ url: req.url, length: body.length });
  res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
  res.end(text);
};

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

function closeServer(server: NetServer & { closeAllConnections?: () => void }): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections?.();
  });
}

async function startUpstream(handler: Handler = echo, tls?: { key: Buffer; cert: Buffer }): Promise<Upstream> {
  const received: Received[] = [];
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      length += chunk.length;
      if (length <= 1024 * 1024) chunks.push(chunk);
    });
    req.on('end', () => {
      received.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bodySha256: hash.digest('hex'),
        bodyLength: length,
      });
      handler(req, res, Buffer.concat(chunks));
    });
  };
  const server = tls ? createHttpsServer(tls, onRequest) : createHttpServer(onRequest);
  const port = await listen(server, 0, '127.0.0.1');
  const upstream = {
    origin: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    received,
    close: () => closeServer(server),
  };
  closers.push(upstream.close);
  return upstream;
}

type Gateway = Awaited<ReturnType<typeof startGateway>>;

async function startGateway(
  apis: unknown[] | null,
  options: { maxPools?: number; oauthServers?: unknown[]; tokenStore?: TokenStore; trustedProxies?: string } = {},
) {
  const registry = new Registry();
  const trustedProxies = parseTrustedProxies(options.trustedProxies);
  const holder = createSnapshotHolder({ tables: createTableBuilder({ tokenStore: options.tokenStore ?? createMemoryTokenStore(), trustedProxies }) });
  if (apis) {
    const oauthServers = (options.oauthServers ?? []).map(parseOAuthServer);
    const result = holder.apply(toSnapshotMessage(1, { apis: apis.map(parseApiDefinition), oauthServers }));
    expect(result).toMatchObject({ ok: true });
  }
  const pools = createUpstreamPools(options);
  const proxy = createProxyServer({ holder, pools, logger: silent, metrics: createProxyMetrics(registry), trustedProxies });
  const port = await proxy.listen(0, '127.0.0.1');
  closers.push(async () => {
    await proxy.close(1_000);
    await pools.close();
  });
  const url = `http://127.0.0.1:${port}`;
  return { url, port, holder, registry, proxy };
}

function api(name: string, proxy: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return { name, proxy, ...extra };
}

function targets(...urls: string[]) {
  return { balancing: 'roundrobin', targets: urls.map((target) => ({ target })) };
}

/** Status of a GET whose request target is sent exactly as written. */
function rawStatus(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = rawRequest({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('gateway errors', () => {
  test('503 NO_SNAPSHOT before a snapshot is applied', async () => {
    const gw = await startGateway(null);
    const res = await httpRequest(`${gw.url}/anything`);
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json).toBe('no configuration loaded');
    expect(res.headers['x-request-id']).toMatch(UUID);
  });

  test('404 NO_ROUTE with a JSON string body', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('foo', { listen_path: '/foo/*', upstreams: targets(up.origin) })]);
    const res = await httpRequest(`${gw.url}/bar`, { headers: { 'x-request-id': 'client-id-1' } });
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.text).toBe('"no API found with those values"');
    expect(res.headers['x-request-id']).toBe('client-id-1');
    expect(up.received).toHaveLength(0);
  });

  test('502 UPSTREAM_UNREACHABLE on a refused port', async () => {
    const port = await freePort();
    const gw = await startGateway([api('down', { listen_path: '/down/*', upstreams: targets(`http://127.0.0.1:${port}`) })]);
    const res = await httpRequest(`${gw.url}/down/x`);
    expect(res.status).toBe(502);
    expect(res.json).toBe('bad gateway');
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['x-request-id']).toMatch(UUID);
  });

  test.each([
    ['a small request body', 'POST', Buffer.from('a=1')],
    ['a 1 MB request body', 'PUT', randomBytes(1024 * 1024)],
  ])('502 is still answered to a client sending %s', async (_name, method, body) => {
    const port = await freePort();
    const gw = await startGateway([api('down', { listen_path: '/down/*', upstreams: targets(`http://127.0.0.1:${port}`) })]);
    const res = await httpRequest(`${gw.url}/down/x`, { method, body });
    expect([res.status, res.json]).toEqual([502, 'bad gateway']);
  });

  test('504 UPSTREAM_TIMEOUT when the upstream never answers (response_header_timeout)', async () => {
    const silentUpstream = await startUpstream(() => undefined); // reads the request, never answers
    const gw = await startGateway([
      api('slow', {
        listen_path: '/slow/*',
        upstreams: targets(silentUpstream.origin),
        forwarding_timeouts: { dial_timeout: '1s', response_header_timeout: '200ms' },
      }),
    ]);
    const started = Date.now();
    const res = await httpRequest(`${gw.url}/slow/x`);
    expect(res.status).toBe(504);
    expect(res.json).toBe('gateway timeout');
    // 200ms, not undici's ~1s timer resolution (see forward.ts HeaderWait).
    expect(Date.now() - started).toBeLessThan(900);
  });

  test('a response_header_timeout of a second or more is kept to the millisecond too (the gateway timer, not undici)', async () => {
    const silentUpstream = await startUpstream(() => undefined);
    const gw = await startGateway([
      api('slow', {
        listen_path: '/slow/*',
        upstreams: targets(silentUpstream.origin),
        forwarding_timeouts: { dial_timeout: '1s', response_header_timeout: '1200ms' },
      }),
    ]);
    const started = Date.now();
    const res = await httpRequest(`${gw.url}/slow/x`);
    const elapsed = Date.now() - started;
    expect(res.status).toBe(504);
    expect(elapsed).toBeGreaterThanOrEqual(1_150);
    expect(elapsed).toBeLessThan(1_800);
  });

  test('upload time does not count against response_header_timeout: the wait starts once the body is sent', async () => {
    const up = await startUpstream(); // answers once the whole body has arrived
    const gw = await startGateway([
      api('up', { listen_path: '/up/*', upstreams: targets(up.origin), forwarding_timeouts: { dial_timeout: '1s', response_header_timeout: '300ms' } }),
    ]);
    const status = await new Promise<number>((resolve, reject) => {
      const req = rawRequest(`${gw.url}/up/x`, { method: 'POST', headers: { 'content-type': 'text/plain' }, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      // 900 ms of upload, three times the header wait.
      req.write('a');
      setTimeout(() => req.write('b'), 450);
      setTimeout(() => req.end('c'), 900);
    });
    expect(status).toBe(200);
    expect(up.received.at(-1)?.bodyLength).toBe(3);
  });

  test('400 BAD_UPSTREAM_HOST when a placeholder would make an invalid host', async () => {
    const gw = await startGateway([api('dyn', { listen_path: '/dyn/{service}/*', strip_path: true, upstreams: targets('http://{service}:9000') })]);
    const res = await httpRequest(`${gw.url}/dyn/a%40evil.test/x`);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/json');
  });
});

describe('forwarded request', () => {
  test('path, query, Host, X-Forwarded-* and a generated X-Request-Id', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('foo', { listen_path: '/foo/*', upstreams: targets(up.origin) })]);
    const res = await httpRequest(`${gw.url}/foo/bar?x=1`, { headers: { authorization: 'Basic abc' } });
    expect(res.status).toBe(200);
    expect(res.headers['x-upstream']).toBe('yes');
    const got = up.received[0]!;
    expect(got.url).toBe('/foo/bar?x=1');
    expect(got.headers.host).toBe(`127.0.0.1:${up.port}`);
    expect(got.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(got.headers['x-forwarded-proto']).toBe('http');
    expect(got.headers['x-forwarded-host']).toBe(`127.0.0.1:${gw.port}`);
    expect(got.headers.authorization).toBe('Basic abc');
    expect(got.headers['x-request-id']).toMatch(UUID);
    expect(res.headers['x-request-id']).toBe(got.headers['x-request-id']);
  });

  test.each([
    ['a sane client id is kept', 'abc-123_XYZ', true],
    ['an id with a space is replaced', 'abc 123', false],
    ['an id longer than 200 characters is replaced', 'a'.repeat(201), false],
  ])('X-Request-Id: %s', async (_name, sent, kept) => {
    const up = await startUpstream();
    const gw = await startGateway([api('foo', { listen_path: '/foo/*', upstreams: targets(up.origin) })]);
    const res = await httpRequest(`${gw.url}/foo`, { headers: { 'x-request-id': sent } });
    const upstreamId = up.received[0]!.headers['x-request-id'];
    expect(res.headers['x-request-id']).toBe(upstreamId);
    if (kept) expect(upstreamId).toBe(sent);
    else expect(upstreamId).toMatch(UUID);
  });

  test('X-Forwarded-Proto and -Host from a client outside TRUSTED_PROXIES are replaced by what the gateway knows; X-Forwarded-For is appended to', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('foo', { listen_path: '/foo/*', upstreams: targets(up.origin) })]);
    await httpRequest(`${gw.url}/foo`, {
      headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-host': 'edge.test', 'x-forwarded-proto': 'https', host: 'api.test' },
    });
    const got = up.received[0]!;
    expect([got.headers['x-forwarded-for'], got.headers['x-forwarded-host'], got.headers['x-forwarded-proto']]).toEqual([
      '203.0.113.7, 127.0.0.1',
      'api.test',
      'http',
    ]);
  });

  test('X-Forwarded-* from a peer in TRUSTED_PROXIES are kept, the peer appended to X-Forwarded-For', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('foo', { listen_path: '/foo/*', upstreams: targets(up.origin) })], { trustedProxies: '127.0.0.0/8' });
    await httpRequest(`${gw.url}/foo`, {
      headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-host': 'edge.test', 'x-forwarded-proto': 'https', host: 'api.test' },
    });
    const got = up.received[0]!;
    expect([got.headers['x-forwarded-for'], got.headers['x-forwarded-host'], got.headers['x-forwarded-proto']]).toEqual([
      '203.0.113.7, 127.0.0.1',
      'edge.test',
      'https',
    ]);
  });

  test('hop-by-hop headers are removed in both directions', async () => {
    // A raw upstream, so the response can carry headers node:http would not let a server write.
    const raw = createNetServer((socket) => {
      socket.once('data', () => {
        socket.end(
          'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close, X-Up-Secret\r\nX-Up-Secret: 1\r\n' +
            'Keep-Alive: timeout=99\r\nProxy-Authenticate: Basic\r\nX-Up-Kept: 1\r\n\r\nok',
        );
      });
    });
    const rawPort = await listen(raw, 0, '127.0.0.1');
    closers.push(() => closeServer(raw));
    const up = await startUpstream();
    const gw = await startGateway([
      api('hop', { listen_path: '/hop/*', upstreams: targets(up.origin) }),
      api('raw', { listen_path: '/raw/*', upstreams: targets(`http://127.0.0.1:${rawPort}`) }),
    ]);
    await httpRequest(`${gw.url}/hop`, {
      headers: {
        connection: 'keep-alive, X-Secret',
        'x-secret': 'for the next hop only',
        'keep-alive': 'timeout=99',
        'proxy-authorization': 'Basic cHJveHk6c2VjcmV0',
        te: 'trailers',
        'x-kept': 'yes',
      },
    });
    const got = up.received[0]!.headers;
    expect(got['x-secret']).toBeUndefined();
    expect(got['keep-alive']).toBeUndefined();
    expect(got['proxy-authorization']).toBeUndefined();
    expect(got.te).toBeUndefined();
    expect(got['x-kept']).toBe('yes');

    const res = await httpRequest(`${gw.url}/raw`);
    expect(res.status).toBe(200);
    expect(res.text).toBe('ok');
    expect(res.headers['x-up-secret']).toBeUndefined();
    expect(res.headers['proxy-authenticate']).toBeUndefined();
    expect(res.headers['keep-alive']).not.toBe('timeout=99');
    expect(res.headers['x-up-kept']).toBe('1');
    expect(res.headers['x-request-id']).toMatch(UUID);
  });

  test.each([
    ['preserve_host false: the target host', false, (port: number) => `127.0.0.1:${port}`],
    ['preserve_host true: the client host', true, () => 'client.example.test:8443'],
  ])('Host header, %s', async (_name, preserveHost, expected) => {
    const up = await startUpstream();
    const gw = await startGateway([api('h', { listen_path: '/h/*', preserve_host: preserveHost, upstreams: targets(up.origin) })]);
    await httpRequest(`${gw.url}/h/x`, { headers: { host: 'client.example.test:8443' } });
    expect(up.received[0]!.headers.host).toBe(expected(up.port));
  });

  test.each([
    ['target query first, then the client query', '/base?a=1', '/q/x?b=2', '/base?a=1&b=2'],
    ['client query alone', '/base', '/q/x?b=2&c=3', '/base?b=2&c=3'],
    ['target query alone', '/base?a=1', '/q/x', '/base?a=1'],
  ])('query merge: %s', async (_name, targetPath, request, expected) => {
    const up = await startUpstream();
    const gw = await startGateway([api('q', { listen_path: '/q/*', upstreams: targets(`${up.origin}${targetPath}`) })]);
    await httpRequest(`${gw.url}${request}`);
    expect(up.received[0]!.url).toBe(expected);
  });

  test('the normalised path is matched and forwarded', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('pub', { listen_path: '/public/*', upstreams: targets(up.origin) })]);
    // Raw request targets: a URL object would resolve the dot segments on the client side.
    expect(await rawStatus(gw.port, '/public/../private/x')).toBe(404);
    expect(await rawStatus(gw.port, '/public/%2e%2e/private/x')).toBe(404);
    expect(await rawStatus(gw.port, '/public/a/./b/../c?k=v')).toBe(200);
    expect(up.received.map((r) => r.url)).toEqual(['/public/a/c?k=v']);
  });

  test('a 5 MB body streams both ways intact', async () => {
    const payload = randomBytes(5 * 1024 * 1024);
    const payloadSha = createHash('sha256').update(payload).digest('hex');
    // Echoes the request body back as it arrives (no buffering in the upstream either).
    const mirror = createHttpServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
    });
    const port = await listen(mirror, 0, '127.0.0.1');
    closers.push(() => closeServer(mirror));
    const gw = await startGateway([api('big', { listen_path: '/big/*', upstreams: targets(`http://127.0.0.1:${port}`) })]);
    const res = await httpRequest(`${gw.url}/big/upload`, { method: 'POST', body: payload, timeoutMs: 20_000 });
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(payload.length);
    expect(res.sha256).toBe(payloadSha);
  });

  test('a request body reaches the upstream intact (sha256)', async () => {
    const up = await startUpstream();
    const payload = randomBytes(5 * 1024 * 1024);
    const gw = await startGateway([api('up', { listen_path: '/up/*', upstreams: targets(up.origin) })]);
    const res = await httpRequest(`${gw.url}/up`, { method: 'PUT', body: payload, timeoutMs: 20_000 });
    expect(res.status).toBe(200);
    expect(up.received[0]!.bodyLength).toBe(payload.length);
    expect(up.received[0]!.bodySha256).toBe(createHash('sha256').update(payload).digest('hex'));
  });

  test('a client that disconnects aborts the upstream request', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const hanging = createHttpServer((_req, res) => {
      res.writeHead(200);
      res.write('partial');
      res.on('close', () => upstreamClosed());
    });
    const port = await listen(hanging, 0, '127.0.0.1');
    closers.push(() => closeServer(hanging));
    const gw = await startGateway([api('hang', { listen_path: '/hang/*', upstreams: targets(`http://127.0.0.1:${port}`) })]);
    await new Promise<void>((resolve) => {
      const req = rawRequest(`${gw.url}/hang`, { agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.end();
    });
    await expect(closed).resolves.toBeUndefined();
  });
});

describe('response streaming', () => {
  test('a client that stops reading stops the upstream (backpressure), then gets everything intact', async () => {
    const chunk = randomBytes(64 * 1024);
    const chunks = 1024; // 64 MiB: far more than every socket buffer on the way can hold
    let upstreamFinished = false;
    const up = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': chunk.length * chunks });
      let sent = 0;
      const more = (): void => {
        while (sent < chunks) {
          sent++;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
        upstreamFinished = true;
      };
      more();
    });
    const gw = await startGateway([api('big', { listen_path: '/big/*', upstreams: targets(up.origin) })]);
    const expected = createHash('sha256');
    for (let i = 0; i < chunks; i++) expected.update(chunk);
    const got = await new Promise<{ status: number; sha256: string; finishedWhilePaused: boolean }>((resolve, reject) => {
      const req = rawRequest(`${gw.url}/big/x`, { agent: false }, (res) => {
        const hash = createHash('sha256');
        res.on('data', (c: Buffer) => hash.update(c));
        res.pause();
        setTimeout(() => {
          const finishedWhilePaused = upstreamFinished;
          res.on('end', () => resolve({ status: res.statusCode ?? 0, sha256: hash.digest('hex'), finishedWhilePaused }));
          res.resume();
        }, 500);
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    expect(got).toEqual({ status: 200, sha256: expected.digest('hex'), finishedWhilePaused: false });
  }, 30_000);

  test('an upstream that breaks off mid-body cuts the client connection (no complete-looking response)', async () => {
    const up = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-length': '100000' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 50);
    });
    const gw = await startGateway([api('cut', { listen_path: '/cut/*', upstreams: targets(up.origin) })]);
    const outcome = await new Promise<string>((resolve) => {
      const req = rawRequest(`${gw.url}/cut/x`, { agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(`ended with ${res.statusCode}`));
        res.on('aborted', () => resolve('aborted'));
        res.on('error', () => resolve('aborted'));
      });
      req.on('error', () => resolve('aborted'));
      req.end();
    });
    expect(outcome).toBe('aborted');
  });

  test('informational 103 Early Hints are skipped, the final response is forwarded', async () => {
    const up = await startUpstream((_req, res) => {
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('final');
    });
    const gw = await startGateway([api('hints', { listen_path: '/hints/*', upstreams: targets(up.origin) })]);
    const res = await httpRequest(`${gw.url}/hints/x`);
    expect([res.status, res.text]).toEqual([200, 'final']);
  });

  test('a response header the gateway cannot repeat is a 502, not a cut connection', async () => {
    // Raw bytes: node:http would refuse to send a control character in a header value.
    const raw = createNetServer((socket) => {
      socket.once('data', () => {
        socket.end('HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nok');
      });
    });
    const port = await listen(raw, 0, '127.0.0.1');
    closers.push(() => closeServer(raw));
    const gw = await startGateway([api('bad', { listen_path: '/bad/*', upstreams: targets(`http://127.0.0.1:${port}`) })]);
    const res = await httpRequest(`${gw.url}/bad/x`);
    expect([res.status, res.json]).toEqual([502, 'bad gateway']);
  });
});

describe('balancing', () => {
  test('round robin: successive requests go to successive targets', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('rr', { listen_path: '/rr', upstreams: targets(`${up.origin}/a`, `${up.origin}/b`, `${up.origin}/c`) })]);
    for (let i = 0; i < 6; i++) expect((await httpRequest(`${gw.url}/rr`)).status).toBe(200);
    expect(up.received.map((r) => r.url)).toEqual(['/a', '/b', '/c', '/a', '/b', '/c']);
  });

  test('weight 3:1 over 8 requests gives 6:2', async () => {
    const up = await startUpstream();
    const gw = await startGateway([
      api('w', {
        listen_path: '/w',
        upstreams: {
          balancing: 'weight',
          targets: [
            { target: `${up.origin}/heavy`, weight: 3 },
            { target: `${up.origin}/light`, weight: 1 },
          ],
        },
      }),
    ]);
    for (let i = 0; i < 8; i++) await httpRequest(`${gw.url}/w`);
    const counts: Record<string, number> = {};
    for (const r of up.received) counts[r.url] = (counts[r.url] ?? 0) + 1;
    expect(counts).toEqual({ '/heavy': 6, '/light': 2 });
  });
});

describe('least_conn: every way an attempt ends takes its count back down', () => {
  /** Upstreams whose answer the request path chooses: /hang never answers, /head answers a head and part of a body, else 200. */
  const behaving: Handler = (req, res) => {
    if (req.url!.includes('/hang')) return;
    if (req.url!.includes('/head')) {
      res.writeHead(200, { 'content-length': '100' });
      res.write('x'.repeat(10));
      return;
    }
    res.end('ok');
  };
  const leastConn = (urls: string[], extra: Record<string, unknown> = {}) => ({
    balancing: 'least_conn',
    targets: urls.map((target) => ({ target })),
    ...extra,
  });

  /** The in-flight counts of the targets of the route that `path` matches. */
  function counts(gw: Gateway, path: string): number[] {
    const snapshot = gw.holder.current()!;
    const match = snapshot.routing.match({ method: 'GET', host: '127.0.0.1', path, headers: {} })!;
    const balancer = snapshot.upstreams.get(match.route)!.balancer;
    return match.route.targets.map((t) => balancer.loadOf(t)!.inFlight);
  }
  const total = (gw: Gateway, path: string) => counts(gw, path).reduce((a, b) => a + b, 0);
  const settled = async (gw: Gateway, path: string) => {
    for (let i = 0; i < 100 && total(gw, path) !== 0; i++) await new Promise((r) => setTimeout(r, 20));
    return counts(gw, path);
  };

  /** A GET that the client destroys once `until` holds (polled). */
  async function abortedWhen(url: string, until: () => boolean): Promise<void> {
    const req = rawRequest(url, { agent: false });
    req.on('error', () => {});
    req.on('response', (res) => res.on('error', () => {}));
    req.end();
    for (let i = 0; i < 200 && !until(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(until()).toBe(true);
    req.destroy();
  }

  test('responses finished: back to 0', async () => {
    const [a, b] = [await startUpstream(behaving), await startUpstream(behaving)];
    const gw = await startGateway([api('lc', { listen_path: '/lc/*', upstreams: leastConn([a.origin, b.origin]) })]);
    for (let i = 0; i < 6; i++) expect((await httpRequest(`${gw.url}/lc/ok`)).status).toBe(200);
    expect([a.received.length, b.received.length]).toEqual([3, 3]);
    expect(counts(gw, '/lc/x')).toEqual([0, 0]);
  });

  test('a client that leaves before the response headers, or in the middle of the body: counted while in flight, back to 0 after', async () => {
    const [a, b] = [await startUpstream(behaving), await startUpstream(behaving)];
    const gw = await startGateway([api('lc', { listen_path: '/lc/*', upstreams: leastConn([a.origin, b.origin]) })]);
    await abortedWhen(`${gw.url}/lc/hang`, () => total(gw, '/lc/x') === 1 && a.received.length + b.received.length === 1);
    await abortedWhen(`${gw.url}/lc/head`, () => total(gw, '/lc/x') === 1 && a.received.length + b.received.length === 2);
    expect(await settled(gw, '/lc/x')).toEqual([0, 0]);
    // Two requests in flight at once go to the two targets (the second avoids the busy one).
    const hung = [rawRequest(`${gw.url}/lc/hang`, { agent: false }), rawRequest(`${gw.url}/lc/hang`, { agent: false })];
    for (const req of hung) req.on('error', () => {}).end();
    for (let i = 0; i < 200 && total(gw, '/lc/x') < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(counts(gw, '/lc/x')).toEqual([1, 1]);
    for (const req of hung) req.destroy();
    expect(await settled(gw, '/lc/x')).toEqual([0, 0]);
  });

  test('an upstream that refuses the connection, and one that times out: back to 0', async () => {
    const [silent1, silent2] = [await startUpstream(() => undefined), await startUpstream(() => undefined)];
    const [dead1, dead2] = [`http://127.0.0.1:${await freePort()}`, `http://127.0.0.1:${await freePort()}`];
    const gw = await startGateway([
      api('refused', { listen_path: '/refused/*', upstreams: leastConn([dead1, dead2]) }),
      api('slow', {
        listen_path: '/slow/*',
        upstreams: leastConn([silent1.origin, silent2.origin]),
        forwarding_timeouts: { dial_timeout: '1s', response_header_timeout: '100ms' },
      }),
    ]);
    for (let i = 0; i < 3; i++) expect((await httpRequest(`${gw.url}/refused/x`)).status).toBe(502);
    for (let i = 0; i < 2; i++) expect((await httpRequest(`${gw.url}/slow/x`)).status).toBe(504);
    expect(counts(gw, '/refused/x')).toEqual([0, 0]);
    expect(await settled(gw, '/slow/x')).toEqual([0, 0]);
  });

  test('a retry that moves on from a refused target: back to 0 on both', async () => {
    const live = await startUpstream(behaving);
    const dead = `http://127.0.0.1:${await freePort()}`;
    const gw = await startGateway([
      api('lc', { listen_path: '/lc/*', upstreams: leastConn([dead, live.origin]) }, { plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }] }),
    ]);
    for (let i = 0; i < 4; i++) expect((await httpRequest(`${gw.url}/lc/ok`)).status).toBe(200);
    expect(live.received).toHaveLength(4);
    expect(counts(gw, '/lc/x')).toEqual([0, 0]);
  });

  test('a retried answer that is dropped for the next try, and a client gone while a retry route waits: back to 0', async () => {
    const failing: Handler = (req, res, body) => (req.url!.includes('/fail') ? res.writeHead(503).end('x') : behaving(req, res, body));
    const [a, b] = [await startUpstream(failing), await startUpstream(behaving)];
    const gw = await startGateway([
      api('lc', { listen_path: '/lc/*', upstreams: leastConn([a.origin, b.origin]) }, { plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }] }),
    ]);
    for (let i = 0; i < 4; i++) await httpRequest(`${gw.url}/lc/fail`);
    expect(counts(gw, '/lc/x')).toEqual([0, 0]);
    await abortedWhen(`${gw.url}/lc/hang`, () => total(gw, '/lc/x') === 1 && [...a.received, ...b.received].some((r) => r.url.includes('/hang')));
    expect(await settled(gw, '/lc/x')).toEqual([0, 0]);
  });
});

describe('upstream pools', () => {
  test('a fixed target whose pool the LRU evicted (and closed) is served through a new pool', async () => {
    const [a, b] = [await startUpstream(), await startUpstream()];
    const gw = await startGateway(
      [api('a', { listen_path: '/a/*', upstreams: targets(a.origin) }), api('b', { listen_path: '/b/*', upstreams: targets(b.origin) })],
      { maxPools: 1 },
    );
    // One pool at most: every request here evicts the other API's pool.
    const statuses = [];
    for (const path of ['/a/1', '/b/1', '/a/2', '/b/2', '/a/3']) statuses.push((await httpRequest(`${gw.url}${path}`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect([a.received.map((r) => r.url), b.received.map((r) => r.url)]).toEqual([
      ['/a/1', '/a/2', '/a/3'],
      ['/b/1', '/b/2'],
    ]);
  });
});

describe('insecure_skip_verify', () => {
  let dir: string;
  let tls: { key: Buffer; cert: Buffer };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    tls = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('a self-signed upstream is accepted only by the API that allows it', async () => {
    const up = await startUpstream(echo, tls);
    const gw = await startGateway([
      api('lax', { listen_path: '/lax/*', insecure_skip_verify: true, upstreams: targets(up.origin) }),
      api('strict', { listen_path: '/strict/*', upstreams: targets(up.origin) }),
    ]);
    const lax = await httpRequest(`${gw.url}/lax/x`);
    expect(lax.status).toBe(200);
    const strict = await httpRequest(`${gw.url}/strict/x`);
    expect(strict.status).toBe(502);
    expect(strict.json).toBe('bad gateway');
    // The lax pool did not leak into the strict API, whichever goes first.
    expect((await httpRequest(`${gw.url}/lax/y`)).status).toBe(200);
    expect((await httpRequest(`${gw.url}/strict/y`)).status).toBe(502);
    expect(up.received.map((r) => r.url)).toEqual(['/lax/x', '/lax/y']);
  });
});

describe('oauth2 storage strategy through the proxy', () => {
  test('a token issued by the token endpoint (streamed past the observer) opens the protected API at once', async () => {
    const auth = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: 'tok-123', token_type: 'bearer', expires_in: 60 }));
    });
    const up = await startUpstream();
    // A store as slow as a remote Redis: the race a client would otherwise win.
    const memory = createMemoryTokenStore();
    const slowStore: TokenStore = {
      ...memory,
      put: (...args) => new Promise((resolve) => setTimeout(resolve, 100)).then(() => memory.put(...args)),
    };
    const gw = await startGateway(
      [
        api(
          'protected',
          { listen_path: '/p/*', upstreams: targets(up.origin) },
          {
            plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'auth' } }],
          },
        ),
      ],
      {
        oauthServers: [
          {
            name: 'auth',
            oauth_endpoints: { token: { listen_path: '/auth/token', upstreams: targets(`${auth.origin}/token`) } },
            token_strategy: { name: 'storage' },
          },
        ],
        tokenStore: slowStore,
      },
    );
    const missing = await httpRequest(`${gw.url}/p/x`);
    expect([missing.status, missing.json]).toEqual([400, 'authorization field missing']);
    const early = await httpRequest(`${gw.url}/p/x`, { headers: { authorization: 'Bearer tok-123' } });
    expect([early.status, early.json]).toEqual([401, 'access token not authorized']);

    const token = await httpRequest(`${gw.url}/auth/token`, { method: 'POST', body: 'grant_type=client_credentials' });
    expect(token.status).toBe(200);
    expect(token.json).toMatchObject({ access_token: 'tok-123' });
    expect(auth.received[0]!.url).toBe('/token');

    // The token response completes only once the token is stored: usable at once, no polling.
    const passed = await httpRequest(`${gw.url}/p/x`, { headers: { authorization: 'Bearer tok-123' } });
    expect(passed.status).toBe(200);
    expect(up.received.at(-1)!.headers.authorization).toBe('Bearer tok-123');
  });

  test('an unreachable token endpoint is a 502 for a client posting a body', async () => {
    const port = await freePort();
    const up = await startUpstream();
    const gw = await startGateway([api('other', { listen_path: '/other/*', upstreams: targets(up.origin) })], {
      oauthServers: [
        {
          name: 'auth',
          oauth_endpoints: { token: { listen_path: '/auth/token', upstreams: targets(`http://127.0.0.1:${port}/token`) } },
          token_strategy: { name: 'storage' },
        },
      ],
    });
    const res = await httpRequest(`${gw.url}/auth/token`, { method: 'POST', body: 'grant_type=client_credentials' });
    expect([res.status, res.json]).toEqual([502, 'bad gateway']);
  });
});

describe('metrics', () => {
  test('requests are counted by route and status', async () => {
    const up = await startUpstream();
    const gw = await startGateway([api('m', { listen_path: '/m/*', upstreams: targets(up.origin) })]);
    await httpRequest(`${gw.url}/m/1`);
    await httpRequest(`${gw.url}/nope`);
    const text = await gw.registry.metrics();
    expect(text).toContain('gatehouse_proxy_requests_total{route="api:m",status="200"} 1');
    expect(text).toContain('gatehouse_proxy_requests_total{route="(unmatched)",status="404"} 1');
    expect(text).toMatch(/gatehouse_proxy_upstream_duration_seconds_count\{route="api:m"\} 1/);
  });
});

describe('graceful close', () => {
  async function slowGateway(delayMs: number): Promise<{ gw: Gateway; up: Upstream }> {
    const up = await startUpstream((_req, res) => {
      setTimeout(() => {
        res.writeHead(200);
        res.end('done');
      }, delayMs);
    });
    const gw = await startGateway([api('slow', { listen_path: '/slow/*', upstreams: targets(up.origin) })]);
    return { gw, up };
  }

  test('in-flight requests finish, then the listener is gone', async () => {
    const { gw, up } = await slowGateway(300);
    const inFlight = httpRequest(`${gw.url}/slow/a`);
    await until(() => up.received.length === 1);
    const closed = gw.proxy.close(5_000);
    const res = await inFlight;
    expect([res.status, res.text]).toEqual([200, 'done']);
    expect(await closed).toBe(true);
    await expect(httpRequest(`${gw.url}/slow/b`, { timeoutMs: 1_000 })).rejects.toThrow(/ECONNREFUSED/);
  });

  test('what is still running at the deadline is cut', async () => {
    const { gw, up } = await slowGateway(10_000);
    const inFlight = httpRequest(`${gw.url}/slow/a`).catch((err: Error) => err);
    await until(() => up.received.length === 1);
    const started = Date.now();
    expect(await gw.proxy.close(200)).toBe(false);
    expect(Date.now() - started).toBeLessThan(2_000);
    // Node's own errors come from another realm than jest's Error: check the message, not the class.
    expect(String(((await inFlight) as Error).message)).toMatch(/socket hang up|ECONNRESET/);
  });
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
