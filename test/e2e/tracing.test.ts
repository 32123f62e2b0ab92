/**
 * Tracing end to end (docs/operations.md "Tracing"): W3C traceparent propagation through a real data plane,
 * and the OpenTelemetry spans of the proxy hop and of admin writes as a real OTLP/HTTP receiver,
 * started here, gets them. A second gateway without OTEL_EXPORTER_OTLP_ENDPOINT still propagates
 * traceparent and sends nothing, not even to the default OTLP port.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { WebSocket as UndiciWebSocket } from 'undici';
import { WebSocketServer } from 'ws';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates } from '../helpers/test-certificates.js';
import { connect as connectHttp2, type ClientHttp2Session } from 'node:http2';
import { readFile } from 'node:fs/promises';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** Where an OTLP/HTTP exporter sends when no endpoint is configured. */
const DEFAULT_OTLP_PORT = 4318;
const SERVER = 2;
const ERROR = 2;
/** Short batches, so spans arrive within the test's patience. */
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '50' };

let receiver: OtlpReceiver;
/** Listens where a wrongly started SDK would export by default. */
let defaultPortReceiver: OtlpReceiver;
let u: Upstream;
let traced: Gateway;
let untraced: Gateway;

const traceId = () => randomBytes(16).toString('hex');
const spanId = () => randomBytes(8).toString('hex');

interface Hop {
  status: number;
  requestId: string;
  upstream: RecordedRequest;
}

/** One request through `dp` to the upstream; what the upstream received. */
async function through(dp: DataPlane, headers: Record<string, string> = {}, path = '/traced/x?secret=1'): Promise<Hop> {
  const requestId = randomUUID();
  const before = u.requests.length;
  const res = await dp.request('GET', path, { headers: { 'x-request-id': requestId, ...headers } });
  return { status: res.status, requestId, upstream: u.requests.slice(before).find((r) => r.headers['x-request-id'] === requestId)! };
}

function parsed(traceparent: unknown): { traceId: string; parentId: string; flags: string } {
  const m = TRACEPARENT.exec(String(traceparent));
  if (!m) throw new Error(`not a version-00 traceparent: ${String(traceparent)}`);
  return { traceId: m[1]!, parentId: m[2]!, flags: m[3]! };
}

const proxySpanOf = (requestId: string) => receiver.waitForSpan(`for request ${requestId}`, (s) => s.attributes['gatehouse.request_id'] === requestId);

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  try {
    defaultPortReceiver = await startOtlpReceiver(DEFAULT_OTLP_PORT);
  } catch (err) {
    throw new Error(`this test listens on the default OTLP/HTTP port ${DEFAULT_OTLP_PORT} to prove that nothing is sent there; free it (${String(err)})`);
  }
  u = await startUpstream('traced', { kind: 'fixed' });
  traced = await startGateway({
    controlPlane: { env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, ...FAST_EXPORT } },
    dataPlaneEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_SERVICE_NAME: 'edge-proxy', ...FAST_EXPORT },
  });
  // Everything of a tracing set-up but the endpoint.
  const noEndpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'untraced', ...FAST_EXPORT };
  untraced = await startGateway({ controlPlane: { env: noEndpoint }, dataPlaneEnv: noEndpoint });
  for (const gw of [traced, untraced]) {
    const created = await gw.admin.createApi(apiDefinition({ name: 'traced', listenPath: '/traced/*', targets: [u.url] }));
    expect(created.status).toBe(201);
    await gw.admin.waitForDataPlanes(created, gw.dps);
  }
}, 60_000);

afterAll(async () => {
  const problems = [await traced?.stop(), await untraced?.stop()].filter(Boolean).join('\n');
  await Promise.all([receiver?.close(), defaultPortReceiver?.close(), u?.close()]);
  expect(problems).toBe('');
}, 30_000);

describe('tracing on: the proxy hop', () => {
  test('a valid client traceparent: the DP span continues that trace and is the parent the upstream receives', async () => {
    const client = { traceId: traceId(), spanId: spanId() };
    const hop = await through(traced.dp, { traceparent: `00-${client.traceId}-${client.spanId}-01`, tracestate: 'vendor=abc' });
    expect(hop.status).toBe(200);
    const span = await proxySpanOf(hop.requestId);
    expect(span).toMatchObject<Partial<ReceivedSpan>>({
      service: 'edge-proxy',
      traceId: client.traceId,
      parentSpanId: client.spanId,
      kind: SERVER,
      name: 'GET api:traced',
    });
    expect(span.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': '/traced/x',
      'network.protocol.version': '1.1',
      'gatehouse.route': 'api:traced',
      'gatehouse.upstream': u.url,
      'http.response.status_code': 200,
    });
    expect(parsed(hop.upstream.headers.traceparent)).toEqual({ traceId: client.traceId, parentId: span.spanId, flags: '01' });
    expect(hop.upstream.headers.tracestate).toBe('vendor=abc');
  });

  test('no client traceparent: a new trace, the DP span its root and the upstream its child', async () => {
    const hop = await through(traced.dp);
    const span = await proxySpanOf(hop.requestId);
    expect(span.parentSpanId).toBe('');
    expect(parsed(hop.upstream.headers.traceparent)).toEqual({ traceId: span.traceId, parentId: span.spanId, flags: '01' });
  });

  test('an invalid client traceparent is replaced by a new trace, and its tracestate dropped', async () => {
    const invalid = `00-${'0'.repeat(32)}-${spanId()}-01`;
    const hop = await through(traced.dp, { traceparent: invalid, tracestate: 'vendor=abc' });
    const span = await proxySpanOf(hop.requestId);
    expect(span.parentSpanId).toBe('');
    expect(hop.upstream.headers.traceparent).not.toBe(invalid);
    expect(parsed(hop.upstream.headers.traceparent)).toEqual({ traceId: span.traceId, parentId: span.spanId, flags: '01' });
    expect(hop.upstream.headers.tracestate).toBeUndefined();
  });

  test('a client trace that is not sampled stays unsampled upstream, with the gateway as parent', async () => {
    const client = { traceId: traceId(), spanId: spanId() };
    const hop = await through(traced.dp, { traceparent: `00-${client.traceId}-${client.spanId}-00` });
    const upstream = parsed(hop.upstream.headers.traceparent);
    expect(upstream.traceId).toBe(client.traceId);
    expect(upstream.flags).toBe('00');
    expect(upstream.parentId).not.toBe(client.spanId);
  });

  test("the gateway's own error gets a span too: 404 without route", async () => {
    const requestId = randomUUID();
    const res = await traced.dp.request('GET', '/nowhere', { headers: { 'x-request-id': requestId } });
    expect(res.status).toBe(404);
    const span = await proxySpanOf(requestId);
    expect(span.attributes['http.response.status_code']).toBe(404);
    expect(span.attributes['gatehouse.route']).toBeUndefined();
  });

  test('an upstream 5xx marks the span as an error', async () => {
    u.setBehaviour((req) => (req.url.startsWith('/traced/fail') ? { kind: 'fixed', status: 503 } : { kind: 'fixed' }));
    try {
      const hop = await through(traced.dp, {}, '/traced/fail');
      expect(hop.status).toBe(503);
      const span = await proxySpanOf(hop.requestId);
      expect([span.attributes['http.response.status_code'], span.statusCode]).toEqual([503, ERROR]);
    } finally {
      u.setBehaviour({ kind: 'fixed' });
    }
  });
});

describe('tracing on: a WebSocket', () => {
  let wsServer: Server;
  const handshakes: IncomingMessage[] = [];

  beforeAll(async () => {
    const wss = new WebSocketServer({ noServer: true });
    wsServer = createServer((_req, res) => res.writeHead(426).end());
    wsServer.on('upgrade', (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        handshakes.push(req);
        ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      }),
    );
    const target = `http://127.0.0.1:${await listen(wsServer, 0, '127.0.0.1')}`;
    const created = await traced.admin.createApi(apiDefinition({ name: 'traced-ws', listenPath: '/traced-ws/*', targets: [target] }));
    expect(created.status).toBe(201);
    await traced.admin.waitForDataPlanes(created, traced.dps);
  });

  afterAll(() => {
    wsServer?.closeAllConnections();
    wsServer?.close();
  });

  test('the handshake gets a span lasting until the connection closes: 101, route, upstream, the parent the target receives', async () => {
    const requestId = randomUUID();
    const client = new UndiciWebSocket(`ws://127.0.0.1:${traced.dp.proxyPort}/traced-ws/chat`, { headers: { 'x-request-id': requestId } } as never);
    await once(client, 'open');
    client.send('hello');
    expect(String((await once(client, 'message'))[0].data)).toBe('hello');
    // No span while the WebSocket is open.
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.spans.some((s) => s.attributes['gatehouse.request_id'] === requestId)).toBe(false);
    client.close();
    const span = await proxySpanOf(requestId);
    expect(span).toMatchObject<Partial<ReceivedSpan>>({ name: 'GET api:traced-ws', kind: SERVER });
    expect(span.attributes).toMatchObject({ 'url.path': '/traced-ws/chat', 'gatehouse.route': 'api:traced-ws', 'http.response.status_code': 101 });
    expect(span.statusCode).not.toBe(ERROR);
    const handshake = handshakes.find((h) => h.headers['x-request-id'] === requestId)!;
    expect(parsed(handshake.headers.traceparent)).toEqual({ traceId: span.traceId, parentId: span.spanId, flags: '01' });
  });
});

describe('tracing on: the OTLP protocols', () => {
  test('by default spans go as protobuf over HTTP, the OpenTelemetry default', async () => {
    const hop = await through(traced.dp);
    await proxySpanOf(hop.requestId);
    const types = new Set(receiver.requests.map((r) => `${r.method} ${r.path} ${r.contentType}`));
    expect([...types]).toEqual(['POST /v1/traces application/x-protobuf']);
  });

  test.each([
    ['http/json', 'http', 'POST /v1/traces application/json'],
    ['grpc', 'grpc', 'POST /opentelemetry.proto.collector.trace.v1.TraceService/Export application/grpc'],
  ] as const)('OTEL_EXPORTER_OTLP_PROTOCOL=%s: a data plane exports its spans so', async (protocol, listener, request) => {
    const own = await startOtlpReceiver(0, listener);
    let dp: DataPlane | undefined;
    try {
      const service = `edge-${protocol.replace('/', '-')}`;
      dp = await startDataPlane({
        controlPlaneAddr: traced.cp.grpcAddr,
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: own.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: protocol, OTEL_SERVICE_NAME: service, ...FAST_EXPORT },
      });
      const client = { traceId: traceId(), spanId: spanId() };
      const hop = await through(dp, { traceparent: `00-${client.traceId}-${client.spanId}-01` });
      expect(hop.status).toBe(200);
      const span = await own.waitForSpan(`for request ${hop.requestId}`, (s) => s.attributes['gatehouse.request_id'] === hop.requestId);
      expect(span).toMatchObject<Partial<ReceivedSpan>>({
        service,
        traceId: client.traceId,
        parentSpanId: client.spanId,
        kind: SERVER,
        name: 'GET api:traced',
      });
      expect(parsed(hop.upstream.headers.traceparent)).toEqual({ traceId: client.traceId, parentId: span.spanId, flags: '01' });
      expect([...new Set(own.requests.map((r) => `${r.method} ${r.path} ${r.contentType}`))]).toEqual([request]);
      expect(dp.recentLogs(200)).toContain(`"protocol":"${protocol}"`);
    } finally {
      if (dp) expect((await dp.stop()).code).toBe(0);
      await own.close();
    }
  });
});

test('an HTTP/2 request over PROXY_TLS_CERT: its span says network.protocol.version 2, and the upstream gets its traceparent', async () => {
  const certs = await createTestCertificates();
  let dp: DataPlane | undefined;
  let session: ClientHttp2Session | undefined;
  try {
    dp = await startDataPlane({
      controlPlaneAddr: traced.cp.grpcAddr,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_SERVICE_NAME: 'edge-h2',
        PROXY_TLS_CERT: certs.serverCert,
        PROXY_TLS_KEY: certs.serverKey,
        ...FAST_EXPORT,
      },
    });
    const client = { traceId: traceId(), spanId: spanId() };
    const requestId = randomUUID();
    session = connectHttp2(`https://localhost:${dp.proxyPort}`, { ca: await readFile(certs.caCert) });
    const stream = session.request({ ':path': '/traced/h2', 'x-request-id': requestId, traceparent: `00-${client.traceId}-${client.spanId}-01` });
    const status = await new Promise<number>((resolve, reject) => {
      stream.once('response', (headers) => resolve(Number(headers[':status'])));
      stream.once('error', reject);
    });
    stream.resume();
    expect(status).toBe(200);
    const span = await proxySpanOf(requestId);
    expect(span).toMatchObject<Partial<ReceivedSpan>>({ service: 'edge-h2', traceId: client.traceId, parentSpanId: client.spanId, name: 'GET api:traced' });
    expect(span.attributes).toMatchObject({ 'network.protocol.version': '2', 'url.path': '/traced/h2', 'http.response.status_code': 200 });
    const upstream = u.requests.find((r) => r.headers['x-request-id'] === requestId)!;
    expect(parsed(upstream.headers.traceparent)).toEqual({ traceId: client.traceId, parentId: span.spanId, flags: '01' });
  } finally {
    session?.close();
    if (dp) await dp.stop();
    await certs.dispose();
  }
});

describe('tracing on: admin writes', () => {
  test("an accepted write: a CP span with kind, name and result, child of the caller's traceparent", async () => {
    const name = `write-${randomBytes(4).toString('hex')}`;
    const caller = { traceId: traceId(), spanId: spanId() };
    const res = await traced.admin.request('POST', '/apis', {
      body: apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }),
      headers: { traceparent: `00-${caller.traceId}-${caller.spanId}-01` },
    });
    expect(res.status).toBe(201);
    const span = await receiver.waitForSpan(`for the write of ${name}`, (s) => s.attributes['gatehouse.name'] === name);
    expect(span).toMatchObject<Partial<ReceivedSpan>>({
      service: 'gatehouse-control-plane',
      traceId: caller.traceId,
      parentSpanId: caller.spanId,
      kind: SERVER,
      name: 'POST /apis',
    });
    expect(span.attributes).toMatchObject({ 'gatehouse.kind': 'api', 'gatehouse.result': 'ok', 'http.response.status_code': 201 });
  });

  test('a refused write: result rejected, its error code as error.type', async () => {
    const name = `refused-${randomBytes(4).toString('hex')}`;
    const res = await traced.admin.request('PUT', `/oauth/servers/${name}`, { body: {} });
    expect(res.status).toBe(404);
    const span = await receiver.waitForSpan(`for the refused write of ${name}`, (s) => s.attributes['gatehouse.name'] === name);
    expect(span.name).toBe('PUT /oauth/servers/{name}');
    expect(span.attributes).toMatchObject({
      'gatehouse.kind': 'oauth-server',
      'gatehouse.result': 'rejected',
      'error.type': 'OAUTH_SERVER_NOT_FOUND',
      'http.response.status_code': 404,
    });
  });
});

describe('tracing off (OTEL_EXPORTER_OTLP_ENDPOINT unset)', () => {
  test('a valid client traceparent is continued upstream with a new parent id; tracestate kept', async () => {
    const client = { traceId: traceId(), spanId: spanId() };
    const hop = await through(untraced.dp, { traceparent: `00-${client.traceId}-${client.spanId}-01`, tracestate: 'vendor=abc' });
    expect(hop.status).toBe(200);
    const upstream = parsed(hop.upstream.headers.traceparent);
    expect([upstream.traceId, upstream.flags]).toEqual([client.traceId, '01']);
    expect(upstream.parentId).not.toBe(client.spanId);
    expect(hop.upstream.headers.tracestate).toBe('vendor=abc');
  });

  test('no client traceparent: one is started (a new trace id per request)', async () => {
    const [a, b] = [await through(untraced.dp), await through(untraced.dp)];
    expect(parsed(a.upstream.headers.traceparent).traceId).not.toBe(parsed(b.upstream.headers.traceparent).traceId);
  });

  test('nothing is exported: no request reaches any receiver, and no service announces tracing', async () => {
    await through(untraced.dp);
    const write = await untraced.admin.createApi(apiDefinition({ name: `quiet-${randomBytes(4).toString('hex')}`, listenPath: '/quiet/*', targets: [u.url] }));
    expect(write.status).toBe(201);
    // Ten times the batch delay the services were given: a started SDK would have exported by now.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(defaultPortReceiver.requests).toEqual([]);
    expect(receiver.spans.filter((s) => s.service === 'untraced')).toEqual([]);
    for (const logs of [untraced.cp.recentLogs(200), untraced.dp.recentLogs(200)]) expect(logs).not.toContain('tracing: exporting');
  });
});
