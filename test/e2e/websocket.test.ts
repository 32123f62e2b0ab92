/**
 * WebSocket through a real data plane (docs/proxy.md "Proxy behaviour"): a real `ws` server behind it, real
 * WebSocket clients (undici's) in front. The handshake is matched and rewritten as any request and carries
 * the gateway's headers; messages flow both ways, text and binary, until either side closes; the route's
 * request plugins run on the handshake (basic_auth refuses, rate_limit counts); a target that refuses the
 * upgrade is relayed; another upgrade (h2c) without a body is served as an ordinary request, with one is
 * refused; a drain that runs out of time cuts open WebSockets.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Agent, WebSocket as UndiciWebSocket } from 'undici';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startDataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { createTestCertificates } from '../helpers/test-certificates.js';
import { readFile } from 'node:fs/promises';

const PASSWORD = 'correct horse battery';
const basic = (user: string) => `Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}`;

let gw: Gateway;
let plain: Upstream;
let wsServer: Server;
let wss: WebSocketServer;
let wsUrl: string;
/** Every handshake the target accepted, with its request. */
const handshakes: IncomingMessage[] = [];
const serverSockets: ServerSocket[] = [];

beforeAll(async () => {
  // The target: echoes every message back as it came (text as text, binary as binary); /refuse answers 403.
  wsServer = createServer((_req, res) => res.writeHead(426).end());
  wss = new WebSocketServer({ noServer: true });
  wsServer.on('upgrade', (req, socket, head) => {
    if (req.url?.startsWith('/refuse')) {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nx-target: refused\r\ncontent-length: 14\r\n\r\nnot for you!\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      handshakes.push(req);
      serverSockets.push(ws);
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    });
  });
  wsUrl = `http://127.0.0.1:${await listen(wsServer, 0, '127.0.0.1')}`;
  plain = await startUpstream('h2c-upstream');
  gw = await startGateway();
  const created = await gw.admin.request('POST', '/credentials/basic_auth', { body: { username: 'ws-user', password: PASSWORD } });
  expect(created.status).toBe(201);
  const ws = (name: string, extra: Record<string, unknown> = {}) => ({
    ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [wsUrl] }),
    proxy: { listen_path: `/${name}/*`, strip_path: true, upstreams: { targets: [{ target: `${wsUrl}/socket` }] } },
    ...extra,
  });
  await createApis(gw, [
    ws('ws'),
    ws('ws-auth', { plugins: [{ name: 'basic_auth' }] }),
    ws('ws-limited', { plugins: [{ name: 'rate_limit', config: { limit: '1-M' } }] }),
    {
      ...apiDefinition({ name: 'ws-refused', listenPath: '/ws-refused/*', targets: [wsUrl] }),
      proxy: { listen_path: '/ws-refused/*', strip_path: true, upstreams: { targets: [{ target: `${wsUrl}/refuse` }] } },
    },
    apiDefinition({ name: 'h2c', listenPath: '/h2c/*', targets: [plain.url] }),
  ]);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  for (const socket of serverSockets) socket.terminate();
  wss?.close();
  await new Promise<void>((resolve) => (wsServer ? wsServer.close(() => resolve()) : resolve()));
  await plain?.close();
  expect(problems).toBe('');
});

const wsAddress = (path: string, base = gw.dp.proxyUrl) => `${base.replace(/^http/, 'ws')}${path}`;

/** Opens a WebSocket through the gateway; resolves once open, rejects with the handshake's failure. */
async function open(path: string, headers: Record<string, string> = {}, base?: string, dispatcher?: Agent): Promise<UndiciWebSocket> {
  const socket = new UndiciWebSocket(wsAddress(path, base), { headers, dispatcher } as never);
  socket.binaryType = 'arraybuffer';
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener(
      'error',
      (event) => reject(new Error(`WebSocket ${path} failed: ${String((event as { message?: string }).message ?? event.type)}`)),
      { once: true },
    );
  });
  return socket;
}

function nextMessage(socket: UndiciWebSocket): Promise<string | ArrayBuffer> {
  return new Promise((resolve) => socket.addEventListener('message', (event) => resolve(event.data as string | ArrayBuffer), { once: true }));
}

/** The raw HTTP answer to a request written by hand on a new connection (status line and headers, body). */
async function rawExchange(request: string, base = gw.dp.proxyUrl): Promise<{ head: string; body: string }> {
  const { port } = new URL(base);
  const socket: Socket = connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  socket.write(request);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'close');
  const text = Buffer.concat(chunks).toString('latin1');
  const split = text.indexOf('\r\n\r\n');
  return { head: text.slice(0, split), body: text.slice(split + 4) };
}

/** The status line and headers of the answer to a request written by hand; the connection is then dropped (a 101 never ends). */
async function rawHead(request: string): Promise<string> {
  const { port } = new URL(gw.dp.proxyUrl);
  const socket: Socket = connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  socket.write(request);
  let text = '';
  for await (const chunk of socket) {
    text += (chunk as Buffer).toString('latin1');
    if (text.includes('\r\n\r\n')) break;
  }
  socket.destroy();
  return text.slice(0, text.indexOf('\r\n\r\n'));
}

test('the handshake is matched and rewritten like any request; text and binary messages flow both ways', async () => {
  const before = handshakes.length;
  const socket = await open('/ws/chat?room=1', { 'x-request-id': 'ws-handshake-1', 'sec-websocket-protocol': 'chat' } as Record<string, string>);
  try {
    const seen = handshakes[before]!;
    expect(seen.url).toBe('/socket/chat?room=1');
    expect(seen.headers['x-request-id']).toBe('ws-handshake-1');
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(seen.headers.upgrade?.toLowerCase()).toBe('websocket');
    const text = nextMessage(socket);
    socket.send('hello through the gateway');
    expect(await text).toBe('hello through the gateway');
    const binary = nextMessage(socket);
    socket.send(new Uint8Array([0, 1, 2, 255]));
    expect([...new Uint8Array((await binary) as ArrayBuffer)]).toEqual([0, 1, 2, 255]);
    // A larger message crosses in several TCP segments.
    const big = 'x'.repeat(256 * 1024);
    const echoed = nextMessage(socket);
    socket.send(big);
    expect(await echoed).toBe(big);
    const metrics = (await httpRequest(`${gw.dp.statusUrl}/metrics`)).text;
    expect(metrics).toMatch(/^gatehouse_proxy_requests_total\{route="api:ws",status="101"\} [1-9]/m);
  } finally {
    socket.close();
  }
});

test("the 101 carries the gateway's X-Request-Id and the target's WebSocket headers", async () => {
  const key = Buffer.from('0123456789abcdef').toString('base64');
  const head = await rawHead(
    `GET /ws/raw HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nX-Request-Id: raw-101\r\n\r\n`,
  );
  expect(head.split('\r\n')[0]).toBe('HTTP/1.1 101 Switching Protocols');
  expect(head.toLowerCase()).toContain('\r\nx-request-id: raw-101');
  expect(head.toLowerCase()).toContain('\r\nupgrade: websocket');
  expect(head.toLowerCase()).toContain('\r\nconnection: upgrade');
  expect(head.toLowerCase()).toContain('\r\nsec-websocket-accept: ');
});

test('closing either side closes the other', async () => {
  const before = serverSockets.length;
  const socket = await open('/ws/close-from-client');
  const serverSide = serverSockets[before]!;
  const serverClosed = once(serverSide, 'close');
  socket.close(1000, 'bye');
  const [code] = (await serverClosed) as [number];
  expect(code).toBe(1000);

  const second = await open('/ws/close-from-target');
  const clientClosed = new Promise<number>((resolve) => second.addEventListener('close', (event) => resolve(event.code), { once: true }));
  serverSockets[before + 1]!.close(4001, 'done');
  expect(await clientClosed).toBe(4001);
});

test("the route's request plugins run on the handshake: basic_auth refuses without credentials, admits with them", async () => {
  const before = handshakes.length;
  const refused = await rawExchange(
    'GET /ws-auth/x HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  expect(refused.head.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
  expect(refused.head.toLowerCase()).toContain('www-authenticate: basic');
  expect(handshakes.length).toBe(before);
  const socket = await open('/ws-auth/x', { authorization: basic('ws-user') });
  try {
    expect(handshakes.length).toBe(before + 1);
    const echoed = nextMessage(socket);
    socket.send('authorised');
    expect(await echoed).toBe('authorised');
  } finally {
    socket.close();
  }
});

test('rate_limit counts handshakes: past the limit, a 429 with Retry-After and nothing reaches the target', async () => {
  const first = await open('/ws-limited/x');
  first.close();
  const before = handshakes.length;
  const limited = await rawExchange(
    'GET /ws-limited/x HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  expect(limited.head.split('\r\n')[0]).toBe('HTTP/1.1 429 Too Many Requests');
  expect(limited.head.toLowerCase()).toMatch(/\r\nretry-after: \d+/);
  expect(limited.body).toBe('"rate limit exceeded"');
  expect(handshakes.length).toBe(before);
});

test("a target that refuses the upgrade: its answer is relayed, with the gateway's X-Request-Id", async () => {
  const refused = await rawExchange(
    'GET /ws-refused/x HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Request-Id: refused-1\r\n\r\n',
  );
  expect(refused.head.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
  expect(refused.head.toLowerCase()).toContain('\r\nx-target: refused');
  expect(refused.head.toLowerCase()).toContain('\r\nx-request-id: refused-1');
  expect(refused.body).toBe('not for you!\r\n');
});

test("no route and no target: the gateway's own JSON errors, as for any request", async () => {
  const noRoute = await rawExchange(
    'GET /nowhere HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  expect(noRoute.head.split('\r\n')[0]).toBe('HTTP/1.1 404 Not Found');
  expect(noRoute.body).toBe('"no API found with those values"');
});

test('another upgrade (h2c): without a body served as an ordinary request, with one refused', async () => {
  const served = await rawExchange(
    'GET /h2c/x HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
  );
  expect(served.head.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  expect(plain.last()?.url).toBe('/h2c/x');
  expect(plain.last()?.headers.upgrade).toBeUndefined();
  const refused = await rawExchange('POST /h2c/x HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\nhi');
  expect(refused.head.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
  expect(refused.body).toBe('"only websocket upgrades are proxied"');
});

test('SIGTERM: a drain that runs out of time cuts open WebSockets, and the data plane exits 0', async () => {
  const dp = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { SHUTDOWN_TIMEOUT: '1s' } });
  const socket = await open('/ws/draining', {}, dp.proxyUrl);
  const closed = new Promise<void>((resolve) => socket.addEventListener('close', () => resolve(), { once: true }));
  const status = await dp.stop();
  await closed;
  expect(status.code).toBe(0);
  await pollUntil(async () => (socket.readyState === UndiciWebSocket.CLOSED ? true : undefined), { what: 'the client side closed' });
});

test('over PROXY_TLS_CERT: wss:// through the data plane, the target told X-Forwarded-Proto: https', async () => {
  const certs = await createTestCertificates();
  const dp = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey } });
  const agent = new Agent({ connect: { ca: await readFile(certs.caCert) } });
  try {
    const before = handshakes.length;
    const socket = await open('/ws/secure', {}, dp.proxyUrl.replace(/^http:/, 'https:'), agent);
    try {
      expect(handshakes[before]!.headers['x-forwarded-proto']).toBe('https');
      const echoed = nextMessage(socket);
      socket.send('over tls');
      expect(await echoed).toBe('over tls');
    } finally {
      socket.close();
    }
  } finally {
    expect((await dp.stop()).code).toBe(0);
    await agent.close();
    await certs.dispose();
  }
});

/** The access line of request `requestId`, once the data plane wrote it. */
function accessLineOf(requestId: string): Promise<Record<string, unknown>> {
  return pollUntil(
    async () => gw.dp.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === requestId)?.json as Record<string, unknown> | undefined,
    { what: `the access line of ${requestId}`, details: () => gw.dp.recentLogs() },
  );
}

test("the access log: one line per handshake, written when the connection closes (status 101, the bytes of its whole life); a refusal's line has its status", async () => {
  const socket = await open('/ws/logged', { 'x-request-id': 'ws-access-1' });
  const echoed = nextMessage(socket);
  socket.send('y'.repeat(10_000));
  await echoed;
  expect(gw.dp.process.lines().some((l) => l.json?.msg === 'access' && l.json?.requestId === 'ws-access-1')).toBe(false);
  socket.close();
  const line = await accessLineOf('ws-access-1');
  expect(line).toMatchObject({ method: 'GET', path: '/ws/logged', route: 'api:ws', upstream: wsUrl, status: 101 });
  expect(line.aborted).toBeUndefined();
  // The 101 head, the echoed 10,000 bytes in a frame, the close frame.
  expect(line.bytes).toBeGreaterThan(10_000);

  await rawExchange(
    'GET /ws-auth/x HTTP/1.1\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Request-Id: ws-access-2\r\n\r\n',
  );
  expect(await accessLineOf('ws-access-2')).toMatchObject({ path: '/ws-auth/x', route: 'api:ws-auth', status: 401 });
});
