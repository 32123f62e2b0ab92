/**
 * HTTP/2 on the TLS proxy listener (PROXY_HTTP2, docs/proxy.md "HTTP/2"): a real data plane offers h2 by ALPN beside
 * HTTP/1.1 on one port and forwards h2 requests to HTTP/1.1 upstreams as RFC 9113 asks (Host from :authority,
 * no pseudo-headers, one Cookie, bodies without Content-Length), with many streams on one connection, the
 * plugins as over HTTP/1.1, GOAWAY on drain, and connection-specific headers never sent to an h2 client.
 */
import { constants, type ClientHttp2Session } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { readFile } from 'node:fs/promises';
import { connect as connectTls } from 'node:tls';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { h2Request, h2Session, expectGoawayOnStop, type H2Answer } from '../helpers/h2-client.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { expectDataPlaneRefusesToStart, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let certs: CertificateFiles;
let ca: Buffer;
let cp: ControlPlane;
let admin: AdminClient;
let echo: Upstream;
let slow: Upstream;
let hopByHop: Upstream;
/** An upstream whose answer node's h2 cannot carry: Content-Type twice. */
let doubled: NetServer;
let dp: DataPlane;

const tlsEnv = () => ({ PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey });

beforeAll(async () => {
  certs = await createTestCertificates();
  ca = await readFile(certs.caCert);
  [echo, slow, hopByHop] = await Promise.all([
    startUpstream('h2-echo', { kind: 'echo' }),
    startUpstream('h2-slow', { kind: 'delay', ms: 800, answer: { kind: 'echo' } }),
    startUpstream('h2-hop', { kind: 'fixed', headers: { connection: 'x-private', 'x-private': 'secret', 'keep-alive': 'timeout=5', 'x-kept': 'yes' } }),
  ]);
  doubled = createNetServer((socket) => {
    socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-type: text/html\r\ncontent-length: 2\r\n\r\nok'));
  });
  await new Promise<void>((resolve) => doubled.listen(0, '127.0.0.1', resolve));
  // A port nothing listens on: the retry route's first target refuses every connection.
  const closed = createNetServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const deadUrl = `http://127.0.0.1:${(closed.address() as { port: number }).port}`;
  await new Promise((resolve) => closed.close(resolve));
  const doubledUrl = `http://127.0.0.1:${(doubled.address() as { port: number }).port}`;
  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  const apis = [
    apiDefinition({ name: 'h2-echo', listenPath: '/echo/*', targets: [echo.url] }),
    apiDefinition({ name: 'h2-slow', listenPath: '/slow/*', targets: [slow.url] }),
    apiDefinition({ name: 'h2-hop', listenPath: '/hop/*', targets: [hopByHop.url] }),
    apiDefinition({ name: 'h2-doubled', listenPath: '/doubled/*', targets: [doubledUrl] }),
    {
      ...apiDefinition({ name: 'h2-retry', listenPath: '/retry/*', targets: [deadUrl, echo.url] }),
      plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }],
    },
    apiDefinition({ name: 'h2-limited', listenPath: '/limited/*', targets: [echo.url], plugins: [{ name: 'body_limit', config: { limit: '1KB' } }] }),
    apiDefinition({
      name: 'h2-plugins',
      listenPath: '/plugins/*',
      targets: [echo.url],
      plugins: [
        { name: 'cors', config: { domains: ['https://app.test'], methods: ['GET', 'POST'] } },
        { name: 'compression', config: {} },
      ],
    }),
  ];
  for (const api of apis) expect((await admin.createApi(api)).status).toBe(201);
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: tlsEnv() });
}, 90_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await Promise.all([echo?.close(), slow?.close(), hopByHop?.close()]);
  await new Promise((resolve) => doubled?.close(resolve));
  await certs?.dispose();
});

const origin = (d: DataPlane) => `https://localhost:${d.proxyPort}`;

const session = (d: DataPlane = dp): Promise<ClientHttp2Session> => h2Session(origin(d), { ca, servername: 'localhost' });
const request = h2Request;

const recorded = (answer: H2Answer): RecordedRequest => JSON.parse(answer.body.toString()) as RecordedRequest;

test('ALPN offers h2 and HTTP/1.1 on the one TLS port: an h2 client gets h2, an HTTP/1.1-only client HTTP/1.1', async () => {
  const protocol = (offer: string[]) =>
    new Promise<string | false | null>((resolve, reject) => {
      const socket = connectTls({ host: '127.0.0.1', port: dp.proxyPort, servername: 'localhost', ca, ALPNProtocols: offer }, () => {
        resolve(socket.alpnProtocol);
        socket.end();
      });
      socket.once('error', reject);
    });
  expect(await protocol(['h2', 'http/1.1'])).toBe('h2');
  expect(await protocol(['http/1.1'])).toBe('http/1.1');
  const listening = dp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'proxy');
  expect(listening?.json).toMatchObject({ tls: true, http2: true });

  const h1 = await httpRequest(`${origin(dp)}/echo/over-h1`, { ca });
  expect(h1.status).toBe(200);
  expect((h1.json as RecordedRequest).url).toBe('/echo/over-h1');
});

test('an h2 request reaches the HTTP/1.1 upstream with Host from :authority, X-Forwarded-*, no pseudo-headers and one Cookie', async () => {
  const s = await session();
  try {
    const answer = await request(s, { ':path': '/echo/a?b=1', ':method': 'GET', cookie: ['a=1', 'b=2'], 'x-custom': 'kept' });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-request-id']).toMatch(/\S/);
    const seen = recorded(answer);
    expect(seen.url).toBe('/echo/a?b=1');
    expect(seen.headers.host).toBe(echo.hostHeader);
    expect(seen.headers['x-forwarded-host']).toBe(`localhost:${dp.proxyPort}`);
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers.cookie).toBe('a=1; b=2');
    expect(seen.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'cookie')).toHaveLength(1);
    expect(seen.rawHeaders.filter((name, i) => i % 2 === 0 && name.startsWith(':'))).toEqual([]);
  } finally {
    s.close();
  }
});

test('a request body without Content-Length (DATA frames to END_STREAM) is forwarded whole; one with Content-Length too', async () => {
  const s = await session();
  try {
    const streamed = await request(s, { ':path': '/echo/upload', ':method': 'POST' }, ['abc', 'defg', 'x'.repeat(20_000)]);
    expect(streamed.status).toBe(200);
    expect(recorded(streamed)).toMatchObject({ method: 'POST', bodyLength: 20_007 });
    expect(recorded(streamed).headers['transfer-encoding']).toBe('chunked');
    const sized = await request(s, { ':path': '/echo/sized', ':method': 'PUT', 'content-length': '5' }, ['hello']);
    expect(recorded(sized)).toMatchObject({ method: 'PUT', bodyLength: 5 });
    expect(recorded(sized).headers['content-length']).toBe('5');
  } finally {
    s.close();
  }
});

test('body_limit counts an h2 body without Content-Length: over the limit is 413, and the connection keeps serving', async () => {
  const s = await session();
  try {
    const before = echo.requests.length;
    const over = await request(s, { ':path': '/limited/big', ':method': 'POST' }, ['x'.repeat(600), 'y'.repeat(600)]);
    expect(over.status).toBe(413);
    expect(JSON.parse(over.body.toString())).toBe('request body too large');
    expect(over.headers.connection).toBeUndefined();
    const within = await request(s, { ':path': '/limited/small', ':method': 'POST' }, ['z'.repeat(500)]);
    expect(within.status).toBe(200);
    expect(recorded(within).bodyLength).toBe(500);
    expect(echo.requests.slice(before).map((r) => r.url)).toEqual(['/limited/small']);
  } finally {
    s.close();
  }
});

test('a Host header that names another host than :authority is 400 and reaches no upstream', async () => {
  const s = await session();
  try {
    const before = echo.requests.length;
    // node's client derives :authority from a Host it is given: both are set here.
    const answer = await request(s, { ':path': '/echo/host', ':method': 'GET', ':authority': `localhost:${dp.proxyPort}`, host: 'evil.test' });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body.toString())).toBe('invalid host');
    expect(echo.requests.length).toBe(before);
    // The same host in both is fine.
    const same = await request(s, { ':path': '/echo/host', ':method': 'GET', host: `localhost:${dp.proxyPort}` });
    expect(same.status).toBe(200);
  } finally {
    s.close();
  }
});

test("an upstream's hop-by-hop headers (and those its Connection names) never reach the h2 client; the rest do", async () => {
  const s = await session();
  try {
    const answer = await request(s, { ':path': '/hop/x', ':method': 'GET' });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-kept']).toBe('yes');
    expect(answer.headers['x-private']).toBeUndefined();
    expect(answer.headers['keep-alive']).toBeUndefined();
    expect(answer.headers.connection).toBeUndefined();
  } finally {
    s.close();
  }
});

test('an upstream answer h2 cannot carry (Content-Type twice) is a 502 on that stream; the connection keeps serving', async () => {
  const s = await session();
  try {
    const answer = await request(s, { ':path': '/doubled/x', ':method': 'GET' });
    expect(answer.status).toBe(502);
    expect(answer.headers['content-type']).toBe('application/json');
    const next = await request(s, { ':path': '/echo/after', ':method': 'GET' });
    expect(next.status).toBe(200);
  } finally {
    s.close();
  }
});

test('100 concurrent streams on one connection are all forwarded and answered', async () => {
  const s = await session();
  try {
    const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => request(s, { ':path': `/echo/many/${i}`, ':method': 'GET' })));
    expect(answers.map((a) => a.status)).toEqual(Array(100).fill(200));
    expect(answers.map((a) => recorded(a).url)).toEqual(Array.from({ length: 100 }, (_, i) => `/echo/many/${i}`));
    expect(s.remoteSettings.maxConcurrentStreams).toBe(128);
  } finally {
    s.close();
  }
});

test('gateway errors and plugins answer over h2 as over HTTP/1.1: 404 JSON, a CORS preflight, a compressed body', async () => {
  const s = await session();
  try {
    const missing = await request(s, { ':path': '/nowhere', ':method': 'GET' });
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body.toString())).toBe('no API found with those values');

    const preflight = await request(s, {
      ':path': '/plugins/x',
      ':method': 'OPTIONS',
      origin: 'https://app.test',
      'access-control-request-method': 'POST',
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.test');

    const compressed = await request(s, {
      ':path': `/plugins/${'long/'.repeat(100)}`,
      ':method': 'GET',
      'accept-encoding': 'gzip',
      origin: 'https://app.test',
    });
    expect(compressed.status).toBe(200);
    expect(compressed.headers['content-encoding']).toBe('gzip');
    expect(compressed.headers['access-control-allow-origin']).toBe('https://app.test');
    const { gunzipSync } = await import('node:zlib');
    expect(JSON.parse(gunzipSync(compressed.body).toString())).toMatchObject({ url: `/plugins/${'long/'.repeat(100)}` });
  } finally {
    s.close();
  }
});

test('retry over h2: a PUT with a body whose first target refuses the connection reaches the next target whole', async () => {
  const s = await session();
  try {
    // Two requests: round robin sends one of them to the dead target first.
    for (const path of ['/retry/put-1', '/retry/put-2']) {
      const answer = await request(s, { ':path': path, ':method': 'PUT' }, ['first part, ', 'second part']);
      expect(answer.status).toBe(200);
      expect(recorded(answer)).toMatchObject({ method: 'PUT', url: path, bodyLength: 'first part, second part'.length });
    }
  } finally {
    s.close();
  }
});

test('a client that resets its stream aborts the upstream request; its access line says 499, aborted', async () => {
  // A raw upstream: it sees the request arrive, never answers, and sees its connection cut.
  let arrived!: () => void;
  let cut!: () => void;
  const requestArrived = new Promise<void>((resolve) => (arrived = resolve));
  const connectionCut = new Promise<void>((resolve) => (cut = resolve));
  const sockets = new Set<Socket>();
  const silent = createNetServer((socket) => {
    sockets.add(socket);
    socket.once('data', () => arrived());
    socket.once('close', () => cut());
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const target = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
  const created = await admin.createApi(apiDefinition({ name: 'h2-silent', listenPath: '/silent/*', targets: [target] }));
  expect(created.status).toBe(201);
  const s = await session();
  try {
    await admin.waitForDataPlanes(created, [dp]);
    const stream = s.request({ ':path': '/silent/x', ':method': 'POST', 'x-request-id': 'h2-reset-1' }, { endStream: false });
    stream.on('error', () => {});
    stream.write('partial');
    await requestArrived;
    stream.close(constants.NGHTTP2_CANCEL);
    await connectionCut;
    const line = await pollUntil(async () => dp.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === 'h2-reset-1'), {
      what: 'the access line of request h2-reset-1',
      timeoutMs: 5_000,
    });
    expect(line.json).toMatchObject({ status: 499, aborted: true, route: 'api:h2-silent' });
  } finally {
    s.close();
    await admin.deleteApi('h2-silent');
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
});

test('the access log has one line per h2 request, with its status and the response body bytes', async () => {
  const s = await session();
  try {
    const answer = await request(s, { ':path': '/echo/logged', ':method': 'GET', 'x-request-id': 'h2-logged-1' });
    expect(answer.status).toBe(200);
    const line = await pollUntil(async () => dp.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === 'h2-logged-1'), {
      what: 'the access line of request h2-logged-1',
      timeoutMs: 5_000,
    });
    expect(line.json).toMatchObject({
      method: 'GET',
      path: '/echo/logged',
      protocol: 'HTTP/2',
      status: 200,
      route: 'api:h2-echo',
      host: `localhost:${dp.proxyPort}`,
      bytes: answer.body.length,
    });
  } finally {
    s.close();
  }
});

test('on SIGTERM an h2 connection gets GOAWAY: its stream in flight finishes, the DP exits 0', async () => {
  const own = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: tlsEnv() });
  const s = await session(own);
  try {
    await expectGoawayOnStop(own, s, slow, '/slow/in-flight');
  } finally {
    s.destroy();
  }
});

test('PROXY_HTTP2=false offers HTTP/1.1 only', async () => {
  const own = await startDataPlane({ controlPlaneAddr: cp.grpcAddr, env: { ...tlsEnv(), PROXY_HTTP2: 'false' } });
  try {
    const alpn = await new Promise<string | false | null>((resolve, reject) => {
      const socket = connectTls({ host: '127.0.0.1', port: own.proxyPort, servername: 'localhost', ca, ALPNProtocols: ['h2', 'http/1.1'] }, () => {
        resolve(socket.alpnProtocol);
        socket.end();
      });
      socket.once('error', reject);
    });
    expect(alpn).toBe('http/1.1');
    expect((await httpRequest(`${origin(own)}/echo/h1-only`, { ca })).status).toBe(200);
  } finally {
    await own.stop();
  }
});

test('PROXY_HTTP2 needs TLS, and takes only true or false: the DP refuses to start, naming the variable', async () => {
  await expectDataPlaneRefusesToStart(cp.grpcAddr, { PROXY_HTTP2: 'true' }, 'PROXY_HTTP2: is offered by TLS ALPN: it needs PROXY_TLS_CERT and PROXY_TLS_KEY');
  await expectDataPlaneRefusesToStart(cp.grpcAddr, { ...tlsEnv(), PROXY_HTTP2: 'yes' }, 'PROXY_HTTP2: expected \\"true\\" or \\"false\\", got \\"yes\\"');
});
