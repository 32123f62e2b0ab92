/**
 * h2c and gRPC at the plain-text proxy listener of a real data plane (PROXY_H2C, docs/proxy.md "HTTP/2" and docs/errors.md): a connection that opens with the HTTP/2 preface is served h2 and forwarded to HTTP/1.1 upstreams,
 * HTTP/1.1 clients share the port, PROXY_H2C=false refuses the preface as HTTP/1.1 does, a drain sends
 * GOAWAY; and a real gRPC client (grpc-js, over h2c) is told the gateway's own errors as gRPC statuses.
 */
import { Agent, request as http1Request } from 'node:http';
import { constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { connect as connectTcp, createServer as createNetServer, type Socket } from 'node:net';
import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { apiDefinition } from '../helpers/api-definition.js';
import { h2Request, h2Session, expectGoawayOnStop, type H2Answer } from '../helpers/h2-client.js';
import { createApis } from '../helpers/create-apis.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { trickle } from '../helpers/trickle.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let echo: Upstream;
let slow: Upstream;

beforeAll(async () => {
  [echo, slow] = await Promise.all([
    startUpstream('h2c-echo', { kind: 'echo' }),
    startUpstream('h2c-slow', { kind: 'delay', ms: 800, answer: { kind: 'echo' } }),
  ]);
  // A port nothing listens on: the upstream of the unreachable route.
  const closed = createNetServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const deadUrl = `http://127.0.0.1:${(closed.address() as { port: number }).port}`;
  await new Promise((resolve) => closed.close(resolve));
  gw = await startGateway();
  await createApis(gw, [
    apiDefinition({ name: 'h2c-echo', listenPath: '/echo/*', targets: [echo.url] }),
    apiDefinition({ name: 'h2c-slow', listenPath: '/slow/*', targets: [slow.url] }),
    apiDefinition({ name: 'grpc-keyed', listenPath: '/grpc.test.Keyed/*', targets: [echo.url], plugins: [{ name: 'key_auth', config: { realm: 'grpc' } }] }),
    apiDefinition({ name: 'grpc-dead', listenPath: '/grpc.test.Dead/*', targets: [deadUrl] }),
  ]);
}, 90_000);

afterAll(async () => {
  const problems = await gw?.stop();
  await Promise.all([echo?.close(), slow?.close()]);
  expect(problems).toBe('');
});

const session = (d: DataPlane = gw.dp, connection?: () => ReturnType<typeof trickle>): Promise<ClientHttp2Session> =>
  h2Session(`http://127.0.0.1:${d.proxyPort}`, connection ? { createConnection: connection } : {});
const request = h2Request;

const recorded = (answer: H2Answer): RecordedRequest => JSON.parse(answer.body.toString()) as RecordedRequest;

const accessLine = (d: DataPlane, requestId: string) =>
  pollUntil(async () => d.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === requestId), {
    what: `the access line of ${requestId}`,
    timeoutMs: 5_000,
  });

test('an h2c client (prior knowledge) gets proxied answers from an HTTP/1.1 upstream: a GET, and a POST streamed in DATA frames', async () => {
  const listening = gw.dp.process.lines().find((l) => l.json?.msg === 'listening' && l.json?.listener === 'proxy');
  expect(listening?.json).toMatchObject({ tls: false, http2: false, h2c: true });
  const s = await session();
  try {
    const got = await request(s, { ':path': '/echo/a?b=1', ':method': 'GET', 'x-request-id': 'h2c-get-1' });
    expect(got.status).toBe(200);
    expect(got.headers['x-request-id']).toBe('h2c-get-1');
    expect(recorded(got)).toMatchObject({ method: 'GET', url: '/echo/a?b=1' });
    expect(recorded(got).headers).toMatchObject({ host: echo.hostHeader, 'x-forwarded-proto': 'http', 'x-forwarded-host': `127.0.0.1:${gw.dp.proxyPort}` });
    expect((await accessLine(gw.dp, 'h2c-get-1')).json).toMatchObject({ protocol: 'HTTP/2', status: 200, route: 'api:h2c-echo', bytes: got.body.length });

    const posted = await request(s, { ':path': '/echo/upload', ':method': 'POST' }, ['abc', 'x'.repeat(50_000), 'end']);
    expect(posted.status).toBe(200);
    expect(recorded(posted)).toMatchObject({ method: 'POST', bodyLength: 50_006 });
    expect(recorded(posted).headers['transfer-encoding']).toBe('chunked');
  } finally {
    s.close();
  }
});

test('the preface split into single-byte TCP segments is still served h2', async () => {
  const s = await session(gw.dp, () => trickle(gw.dp.proxyPort, 24));
  try {
    const got = await request(s, { ':path': '/echo/trickled', ':method': 'GET' });
    expect(got.status).toBe(200);
    expect(recorded(got).url).toBe('/echo/trickled');
  } finally {
    s.close();
  }
});

test('HTTP/1.1 clients on the same port are served as before, keep-alive included', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<Socket>();
  try {
    for (const path of ['/echo/h1-first', '/echo/h1-second']) {
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http1Request({ host: '127.0.0.1', port: gw.dp.proxyPort, path, method: 'PUT', agent }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('socket', (socket) => sockets.add(socket));
        req.on('error', reject);
        req.end('twelve bytes');
      });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toMatchObject({ method: 'PUT', url: path, bodyLength: 12 });
    }
    expect(sockets.size).toBe(1);
  } finally {
    agent.destroy();
  }
});

/** What a raw connection that sends the HTTP/2 preface (and a SETTINGS frame) gets back before the server closes it. */
function prefaceAnswer(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connectTcp(port, '127.0.0.1', () =>
      socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])])),
    );
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

test('PROXY_H2C=false: the preface is refused as HTTP/1.1 refuses it (400, connection closed), HTTP/1.1 is served', async () => {
  const own = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { PROXY_H2C: 'false' } });
  try {
    expect(await prefaceAnswer(own.proxyPort)).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect((await own.request('GET', '/echo/h1-only')).status).toBe(200);
  } finally {
    expect((await own.stop()).code).toBe(0);
  }
});

test('on SIGTERM an h2c connection gets GOAWAY: its stream in flight finishes, the DP exits 0', async () => {
  const own = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr });
  const s = await session(own);
  try {
    await expectGoawayOnStop(own, s, slow, '/slow/in-flight');
  } finally {
    s.destroy();
  }
});

describe("the gateway's own errors to a gRPC client", () => {
  let client: Client;
  beforeAll(() => {
    client = new Client(`127.0.0.1:${gw.dp.proxyPort}`, credentials.createInsecure());
  });
  afterAll(() => client?.close());

  /** A unary call with raw bytes in and out (no .proto needed); resolves with the error it ends in. */
  function failedCall(method: string, metadata: Record<string, string> = {}): Promise<ServiceError> {
    const md = new Metadata();
    for (const [name, value] of Object.entries(metadata)) md.set(name, value);
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        method,
        (message: Buffer) => message,
        (message: Buffer) => message,
        Buffer.from('ping'),
        md,
        { deadline: Date.now() + 10_000 },
        (err, value) => (err ? resolve(err) : reject(new Error(`the call was answered: ${String(value)}`))),
      );
    });
  }

  test("a method no route serves is UNIMPLEMENTED, with the gateway's message; the access log keeps the HTTP status", async () => {
    const err = await failedCall('/grpc.test.Missing/Call', { 'x-request-id': 'grpc-missing-1' });
    expect({ code: err.code, details: err.details }).toEqual({ code: status.UNIMPLEMENTED, details: 'no API found with those values' });
    expect(err.metadata.get('x-request-id')).toEqual(['grpc-missing-1']);
    expect((await accessLine(gw.dp, 'grpc-missing-1')).json).toMatchObject({ protocol: 'HTTP/2', status: 404, route: null });
  });

  test("a route whose key_auth finds no key is UNAUTHENTICATED, with the plugin's WWW-Authenticate", async () => {
    const before = echo.requests.length;
    const err = await failedCall('/grpc.test.Keyed/Call');
    expect({ code: err.code, details: err.details }).toEqual({ code: status.UNAUTHENTICATED, details: 'no API key found in request' });
    expect(err.metadata.get('www-authenticate')).toEqual(['Key realm="grpc"']);
    expect(echo.requests.length).toBe(before);
  });

  test('a route whose upstream refuses connections is UNAVAILABLE', async () => {
    const err = await failedCall('/grpc.test.Dead/Call');
    expect({ code: err.code, details: err.details }).toEqual({ code: status.UNAVAILABLE, details: 'bad gateway' });
  });

  test("the answer is gRPC's Trailers-Only: 200, application/grpc, grpc-status and grpc-message in one HEADERS frame ending the stream; gRPC-Web the same in its own type, anything else JSON", async () => {
    const s = await session();
    try {
      const headersEndingStream = await new Promise<{ headers: IncomingHttpHeaders; endStream: boolean }>((resolve, reject) => {
        const stream = s.request({ ':path': '/grpc.test.Missing/Call', ':method': 'POST', 'content-type': 'application/grpc+proto', te: 'trailers' });
        stream.on('response', (headers, flags) => resolve({ headers, endStream: (flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0 }));
        stream.on('error', reject);
        stream.end(Buffer.from([0, 0, 0, 0, 0]));
      });
      expect(headersEndingStream.endStream).toBe(true);
      expect(headersEndingStream.headers).toMatchObject({
        ':status': 200,
        'content-type': 'application/grpc',
        'grpc-status': '12',
        'grpc-message': 'no API found with those values',
      });
      expect(headersEndingStream.headers['content-length']).toBeUndefined();

      // gRPC-Web clients read a Trailers-Only status from the headers too, in their own Content-Type.
      const web = await request(s, { ':path': '/grpc.test.Missing/Call', ':method': 'POST', 'content-type': 'application/grpc-web-text+proto' }, ['x']);
      expect(web.status).toBe(200);
      expect(web.headers).toMatchObject({ 'content-type': 'application/grpc-web-text', 'grpc-status': '12', 'grpc-message': 'no API found with those values' });
      expect(web.body.length).toBe(0);
      // Anything else keeps the JSON body.
      const plain = await request(s, { ':path': '/grpc.test.Missing/Call', ':method': 'POST', 'content-type': 'application/json' }, ['x']);
      expect(plain.status).toBe(404);
      expect(plain.headers['grpc-status']).toBeUndefined();
      expect(JSON.parse(plain.body.toString())).toBe('no API found with those values');
    } finally {
      s.close();
    }
  });

  test('a gRPC-typed request over HTTP/1.1 gets the same statuses, as headers of an empty 200', async () => {
    const answer = await gw.dp.request('POST', '/grpc.test.Keyed/Call', { headers: { 'content-type': 'application/grpc' }, body: 'x' });
    expect(answer.status).toBe(200);
    expect(answer.headers).toMatchObject({
      'content-type': 'application/grpc',
      'grpc-status': '16',
      'grpc-message': 'no API key found in request',
      'www-authenticate': 'Key realm="grpc"',
    });
    expect(answer.text).toBe('');
  });
});
