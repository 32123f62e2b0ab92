/**
 * gRPC and HTTP/2 upstreams (`proxy.upstreams.protocol: "http2"`, docs/proxy.md "gRPC and HTTP/2 upstreams"): a real
 * @grpc/grpc-js client calls a real @grpc/grpc-js server through a real data plane (h2 on its TLS listener), in
 * all four call shapes, with metadata, trailers, status codes and cancellation carried end to end; h2c and h2 by
 * ALPN to the upstream; HTTP/1.1 clients and node:http2 upstreams on the same routes; health probes over h2.
 */
import * as grpc from '@grpc/grpc-js';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { connect as connectHttp2, createServer as createH2cServer, type Http2Server, type IncomingHttpHeaders } from 'node:http2';
import { createServer as createNetServer } from 'node:net';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';
import { frame, rawMethod } from '../helpers/grpc-raw.js';
import { metricValue } from '../helpers/metric-value.js';

const same = (b: Buffer): Buffer => b;
/** request_termination's message on the grpc-down route: `%`, `:` and non-ASCII travel percent-encoded in grpc-message. */
const DOWN_MESSAGE = 'down for maintenance: 100% ✓';
/** A service without a .proto: messages are raw bytes. */
const ECHO = {
  Unary: rawMethod('Unary', false, false),
  Fail: rawMethod('Fail', false, false),
  Hang: rawMethod('Hang', false, false),
  ServerStream: rawMethod('ServerStream', false, true),
  ClientStream: rawMethod('ClientStream', true, false),
  Bidi: rawMethod('Bidi', true, true),
} satisfies grpc.ServiceDefinition;
const EchoClient = grpc.makeGenericClientConstructor(ECHO, 'Echo');
type Echo = InstanceType<typeof EchoClient> & Record<keyof typeof ECHO, (...args: unknown[]) => unknown>;

let certs: CertificateFiles;
let ca: Buffer;
let cp: ControlPlane;
let admin: AdminClient;
let dp: DataPlane;
/** Without TLS: gRPC clients come over h2c. */
let plainDp: DataPlane;
let grpcServer: grpc.Server;
let grpcTlsServer: grpc.Server;
/** Answers calls, but reports test.Echo NOT_SERVING. */
let sickServer: grpc.Server;
let h2c: Http2Server;
/** What the upstream saw of each Unary call (its metadata), newest last. */
const seen: grpc.Metadata[] = [];
/** Hang calls the upstream saw cancelled. */
let cancelled = 0;

function echoImplementation(origin: string): grpc.UntypedServiceImplementation {
  return {
    Unary(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
      seen.push(call.metadata);
      const header = new grpc.Metadata();
      header.set('x-origin', origin);
      call.sendMetadata(header);
      const trailer = new grpc.Metadata();
      trailer.set('x-digest', createHash('sha256').update(call.request).digest('hex'));
      callback(null, Buffer.concat([Buffer.from('echo:'), call.request]), trailer);
    },
    Fail(_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
      callback({ code: grpc.status.NOT_FOUND, details: 'no such widget' });
    },
    Hang(call: grpc.ServerUnaryCall<Buffer, Buffer>) {
      call.on('cancelled', () => cancelled++);
    },
    ServerStream(call: grpc.ServerWritableStream<Buffer, Buffer>) {
      const { n, size, failAfter } = JSON.parse(call.request.toString()) as { n: number; size: number; failAfter?: number };
      for (let i = 0; i < n; i++) {
        if (i === failAfter) {
          call.emit('error', { code: grpc.status.ABORTED, details: `stopped after ${i}` });
          return;
        }
        call.write(Buffer.alloc(size, i % 256));
      }
      const trailer = new grpc.Metadata();
      trailer.set('x-count', String(n));
      call.end(trailer);
    },
    ClientStream(call: grpc.ServerReadableStream<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
      let total = 0;
      let messages = 0;
      call.on('data', (m: Buffer) => {
        total += m.length;
        messages++;
      });
      call.on('end', () => callback(null, Buffer.from(`${messages} messages, ${total} bytes`)));
    },
    Bidi(call: grpc.ServerDuplexStream<Buffer, Buffer>) {
      call.on('data', (m: Buffer) => call.write(Buffer.concat([Buffer.from('re:'), m])));
      call.on('end', () => call.end());
    },
  };
}

/** grpc.health.v1.Health/Check, raw: HealthCheckRequest{service = 1}, HealthCheckResponse{status = 1}. */
const HEALTH = { Check: { ...rawMethod('Check', false, false), path: '/grpc.health.v1.Health/Check' } } satisfies grpc.ServiceDefinition;

/** `serving`: whether it answers SERVING (1) for test.Echo, else NOT_SERVING (2). */
function healthImplementation(serving: boolean): grpc.UntypedServiceImplementation {
  return {
    Check(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
      const service = call.request.length === 0 ? '' : call.request.subarray(2).toString();
      if (service === 'test.Echo') callback(null, Buffer.from([0x08, serving ? 1 : 2]));
      else callback({ code: grpc.status.NOT_FOUND, details: `unknown service ${service}` });
    },
  };
}

async function startGrpcServer(credentials: grpc.ServerCredentials, origin: string, serving = true): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server();
  server.addService(ECHO, echoImplementation(origin));
  server.addService(HEALTH, healthImplementation(serving));
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))));
  return { server, port };
}

/** 1 MiB then trailers: the trailers must follow every body byte, however slowly the client reads. */
const BIG = Buffer.alloc(1024 * 1024, 'g');
const BIG_DIGEST = createHash('sha256').update(BIG).digest('hex');

let deadPort: number;
/** An h2c upstream taking 2 streams per connection, which answers only once 4 requests are in flight at once. */
let narrow: Http2Server;
const narrowSessions = new Set<unknown>();

beforeAll(async () => {
  certs = await createTestCertificates();
  ca = await readFile(certs.caCert);
  const [plain, secure] = await Promise.all([
    startGrpcServer(grpc.ServerCredentials.createInsecure(), 'h2c'),
    startGrpcServer(
      grpc.ServerCredentials.createSsl(ca, [{ cert_chain: await readFile(certs.serverCert), private_key: await readFile(certs.serverKey) }], false),
      'h2-tls',
    ),
  ]);
  grpcServer = plain.server;
  grpcTlsServer = secure.server;
  const sick = await startGrpcServer(grpc.ServerCredentials.createInsecure(), 'sick', false);
  sickServer = sick.server;
  // A plain (not gRPC) h2c-only upstream: it refuses HTTP/1.1, so only the http2 protocol reaches it.
  h2c = createH2cServer((req, res) => {
    if (req.url === '/plain/big') {
      res.setHeader('content-type', 'application/octet-stream');
      res.write(BIG.subarray(0, BIG.length / 2));
      res.addTrailers({ 'x-digest': BIG_DIGEST });
      res.end(BIG.subarray(BIG.length / 2));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream-version': req.httpVersion, 'x-seen-authority': req.headers[':authority'] ?? '' });
    res.end(`${req.method} ${req.url} ${req.headers['x-forwarded-proto'] ?? ''}`);
  });
  await new Promise<void>((resolve) => h2c.listen(0, '127.0.0.1', resolve));
  const waiting: (() => void)[] = [];
  narrow = createH2cServer({ settings: { maxConcurrentStreams: 2 } }, (req, res) => {
    narrowSessions.add(req.stream.session);
    waiting.push(() => res.end(`in flight together: ${waiting.length}`));
    if (waiting.length === 4) for (const answer of waiting.splice(0)) answer();
  });
  await new Promise<void>((resolve) => narrow.listen(0, '127.0.0.1', resolve));
  const h2cPort = (h2c.address() as { port: number }).port;
  const closed = createNetServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  deadPort = (closed.address() as { port: number }).port;
  await new Promise((resolve) => closed.close(resolve));

  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  const apis = [
    // grpc_web: the same route serves gRPC clients and, translated, gRPC-Web ones.
    apiDefinition({
      name: 'grpc-h2c',
      listenPath: '/test.Echo/*',
      targets: [`http://127.0.0.1:${plain.port}`],
      protocol: 'http2',
      plugins: [{ name: 'grpc_web' }],
    }),
    apiDefinition({ name: 'grpc-tls', hosts: ['tls.grpc.test'], listenPath: '/test.Echo/*', targets: [`https://127.0.0.1:${secure.port}`], protocol: 'http2' }),
    apiDefinition({
      name: 'grpc-slow',
      hosts: ['slow.grpc.test'],
      listenPath: '/test.Echo/*',
      targets: [`http://127.0.0.1:${plain.port}`],
      protocol: 'http2',
      responseHeaderTimeout: '300ms',
    }),
    {
      ...apiDefinition({
        name: 'plain-h2c',
        listenPath: '/plain/*',
        targets: [`http://127.0.0.1:${h2cPort}`, `http://127.0.0.1:${deadPort}`],
        protocol: 'http2',
      }),
    },
    apiDefinition({ name: 'dead-h2', listenPath: '/dead/*', targets: [`http://127.0.0.1:${deadPort}`], protocol: 'http2' }),
    apiDefinition({ name: 'narrow', listenPath: '/narrow/*', targets: [`http://127.0.0.1:${(narrow.address() as { port: number }).port}`], protocol: 'http2' }),
    apiDefinition({
      name: 'grpc-checked',
      hosts: ['checked.grpc.test'],
      listenPath: '/test.Echo/*',
      targets: [`http://127.0.0.1:${plain.port}`, `http://127.0.0.1:${sick.port}`],
      protocol: 'http2',
    }),
    // Answered by the gateway: the upstream is never asked.
    apiDefinition({
      name: 'grpc-down',
      listenPath: '/down.Svc/*',
      targets: [`http://127.0.0.1:${deadPort}`],
      protocol: 'http2',
      plugins: [{ name: 'request_termination', config: { status_code: 503, message: DOWN_MESSAGE } }],
    }),
    apiDefinition({
      name: 'grpc-pong',
      listenPath: '/pong.Svc/*',
      targets: [`http://127.0.0.1:${deadPort}`],
      protocol: 'http2',
      plugins: [{ name: 'request_termination', config: { status_code: 200, body: 'pong', content_type: 'text/plain' } }],
    }),
    apiDefinition({
      name: 'grpc-moved',
      listenPath: '/moved.Svc/*',
      targets: [`http://127.0.0.1:${deadPort}`],
      protocol: 'http2',
      plugins: [{ name: 'redirect', config: { status_code: 301, host: 'elsewhere.test' } }],
    }),
  ];
  // gRPC's health protocol: the sick target says NOT_SERVING for test.Echo, though it answers calls.
  (apis[6]!.proxy as { upstreams: Record<string, unknown> }).upstreams.health_check = {
    active: { grpc: { service: 'test.Echo' }, interval: '200ms', unhealthy_threshold: 1, healthy_threshold: 1 },
  };
  // The plain route's second target is dead: the active check (over h2, as the route's requests) takes it out.
  (apis[3]!.proxy as { upstreams: Record<string, unknown> }).upstreams.health_check = {
    active: { path: '/healthz', interval: '200ms', unhealthy_threshold: 1, healthy_threshold: 1 },
  };
  for (const api of apis) expect((await admin.createApi(api)).status).toBe(201);
  [dp, plainDp] = await Promise.all([
    startDataPlane({
      controlPlaneAddr: cp.grpcAddr,
      env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey, UPSTREAM_CA_FILE: certs.caCert },
    }),
    startDataPlane({ controlPlaneAddr: cp.grpcAddr }),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all([dp?.stop(), plainDp?.stop()]);
  await cp?.dispose();
  grpcServer?.forceShutdown();
  grpcTlsServer?.forceShutdown();
  sickServer?.forceShutdown();
  await new Promise((resolve) => (h2c ? h2c.close(resolve) : resolve(undefined)));
  await new Promise((resolve) => (narrow ? narrow.close(resolve) : resolve(undefined)));
  await certs?.dispose();
});

function client(host?: string): Echo {
  const options: grpc.ClientOptions = host ? { 'grpc.default_authority': host, 'grpc.ssl_target_name_override': 'localhost' } : {};
  return new EchoClient(`127.0.0.1:${dp.proxyPort}`, grpc.credentials.createSsl(ca), options) as Echo;
}

/** An HTTP/1.1 request to the data plane's TLS listener. */
const https = (pathAndQuery: string) => httpRequest(`https://127.0.0.1:${dp.proxyPort}${pathAndQuery}`, { ca });

interface UnaryResult {
  error: grpc.ServiceError | null;
  value?: Buffer;
  header?: grpc.Metadata;
  trailer?: grpc.Metadata;
}

function unary(
  c: Echo,
  name: 'Unary' | 'Fail' | 'Hang',
  request: Buffer,
  metadata = new grpc.Metadata(),
  options: grpc.CallOptions = {},
): Promise<UnaryResult> & { call: grpc.ClientUnaryCall } {
  let call!: grpc.ClientUnaryCall;
  const result = new Promise<UnaryResult>((resolve) => {
    const out: UnaryResult = { error: null };
    call = (c[name] as (r: Buffer, m: grpc.Metadata, o: grpc.CallOptions, cb: grpc.requestCallback<Buffer>) => grpc.ClientUnaryCall)(
      request,
      metadata,
      options,
      (error, value) => {
        out.error = error;
        out.value = value;
      },
    );
    call.on('metadata', (m) => (out.header = m));
    call.on('status', (s) => {
      out.trailer = s.metadata;
      resolve(out);
    });
  });
  return Object.assign(result, { call });
}

test('a unary call goes to an h2c upstream and back: message, metadata both ways and trailing metadata', async () => {
  const c = client();
  const metadata = new grpc.Metadata();
  metadata.set('x-client', 'jest');
  const { error, value, header, trailer } = await unary(c, 'Unary', Buffer.from('hello'), metadata);
  c.close();
  expect(error).toBeNull();
  expect(value!.toString()).toBe('echo:hello');
  expect(header!.get('x-origin')).toEqual(['h2c']);
  expect(header!.get('x-request-id')[0]).toEqual(expect.any(String));
  expect(trailer!.get('x-digest')).toEqual([createHash('sha256').update('hello').digest('hex')]);
  const upstreamSaw = seen.at(-1)!;
  expect(upstreamSaw.get('x-client')).toEqual(['jest']);
  expect(upstreamSaw.get('x-forwarded-proto')).toEqual(['https']);
  expect(upstreamSaw.get('x-request-id')).toEqual(header!.get('x-request-id'));
});

/** gatehouse_proxy_grpc_responses_total of `route` and `grpcStatus` on the data plane's status listener (0 when absent). */
const grpcCount = (route: string, grpcStatus: number): Promise<number> =>
  metricValue(dp.statusUrl, `gatehouse_proxy_grpc_responses_total{route="${route}",grpc_status="${grpcStatus}"}`);

test("the access log and the metrics record each call's gRPC status: the trailers', a Trailers-Only head's, the gateway's own", async () => {
  const before = await Promise.all([grpcCount('api:grpc-h2c', 0), grpcCount('api:grpc-h2c', 5), grpcCount('(unmatched)', 12)]);
  const c = client();
  const withId = (id: string) => {
    const m = new grpc.Metadata();
    m.set('x-request-id', id);
    return m;
  };
  const tag = `log-${Date.now()}`;
  expect((await unary(c, 'Unary', Buffer.from('a'), withId(`${tag}-ok`))).error).toBeNull();
  expect((await unary(c, 'Fail', Buffer.from('a'), withId(`${tag}-fail`))).error?.code).toBe(grpc.status.NOT_FOUND);
  const missing = new EchoClient(`127.0.0.1:${dp.proxyPort}`, grpc.credentials.createSsl(ca)) as Echo;
  const refused = await new Promise<grpc.ServiceError | null>((resolve) =>
    missing.makeUnaryRequest('/nowhere.Svc/Call', same, same, Buffer.from('a'), withId(`${tag}-none`), (err) => resolve(err)),
  );
  missing.close();
  c.close();
  expect(refused?.code).toBe(grpc.status.UNIMPLEMENTED);
  const lines = await pollUntil(
    async () => {
      const found = dp.process.lines().flatMap((l) => (l.json?.msg === 'access' && String(l.json.requestId).startsWith(tag) ? [l.json] : []));
      return found.length === 3 ? found : undefined;
    },
    { what: 'three access lines', timeoutMs: 5_000 },
  );
  const statusOf = (suffix: string) => lines.find((l) => l.requestId === `${tag}-${suffix}`)!;
  expect(statusOf('ok')).toMatchObject({ status: 200, grpcStatus: 0 });
  expect(statusOf('fail')).toMatchObject({ status: 200, grpcStatus: 5 });
  expect(statusOf('none')).toMatchObject({ status: 404, grpcStatus: 12 });
  const after = await Promise.all([grpcCount('api:grpc-h2c', 0), grpcCount('api:grpc-h2c', 5), grpcCount('(unmatched)', 12)]);
  expect(after.map((n, i) => n - before[i]!)).toEqual([1, 1, 1]);
});

test('h2c end to end: a client without TLS to the plain-text listener, an h2c upstream behind it', async () => {
  const c = new EchoClient(`127.0.0.1:${plainDp.proxyPort}`, grpc.credentials.createInsecure()) as Echo;
  const { error, value, header } = await unary(c, 'Unary', Buffer.from('cleartext'));
  c.close();
  expect(error).toBeNull();
  expect(value!.toString()).toBe('echo:cleartext');
  expect(header!.get('x-origin')).toEqual(['h2c']);
  expect(seen.at(-1)!.get('x-forwarded-proto')).toEqual(['http']);
});

test('h2 by ALPN to an https:// upstream (UPSTREAM_CA_FILE trusted)', async () => {
  const c = client('tls.grpc.test');
  const { error, value, header } = await unary(c, 'Unary', Buffer.from('over tls'));
  c.close();
  expect(error).toBeNull();
  expect(value!.toString()).toBe('echo:over tls');
  expect(header!.get('x-origin')).toEqual(['h2-tls']);
});

test("an upstream's error status reaches the client with its message (a trailers-only response)", async () => {
  const c = client();
  const { error } = await unary(c, 'Fail', Buffer.from('x'));
  c.close();
  expect(error?.code).toBe(grpc.status.NOT_FOUND);
  expect(error?.details).toBe('no such widget');
});

test('server streaming: 64 messages of 64 KiB arrive whole and in order through a client that pauses, then the status', async () => {
  const c = client();
  const call = (c.ServerStream as (r: Buffer) => grpc.ClientReadableStream<Buffer>)(Buffer.from(JSON.stringify({ n: 64, size: 64 * 1024 })));
  const received: Buffer[] = [];
  let pausedOnce = false;
  call.on('data', (m: Buffer) => {
    received.push(m);
    if (!pausedOnce) {
      // The data plane's client side backs up while this sleeps; the upstream's trailers must still come last.
      pausedOnce = true;
      call.pause();
      setTimeout(() => call.resume(), 500);
    }
  });
  const status = await new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  c.close();
  expect(status.code).toBe(grpc.status.OK);
  expect(status.metadata.get('x-count')).toEqual(['64']);
  expect(received).toHaveLength(64);
  received.forEach((m, i) => {
    expect(m.length).toBe(64 * 1024);
    expect(m[0]).toBe(i % 256);
  });
});

test('a stream the upstream ends with an error after some messages: those messages, then its status', async () => {
  const c = client();
  const call = (c.ServerStream as (r: Buffer) => grpc.ClientReadableStream<Buffer>)(Buffer.from(JSON.stringify({ n: 10, size: 10, failAfter: 3 })));
  let messages = 0;
  call.on('data', () => messages++);
  const status = await new Promise<grpc.StatusObject>((resolve) => {
    call.on('status', resolve);
    call.on('error', () => undefined);
  });
  c.close();
  expect(status.code).toBe(grpc.status.ABORTED);
  expect(status.details).toBe('stopped after 3');
  expect(messages).toBe(3);
});

test('client streaming: 200 messages of 4 KiB reach the upstream, its one answer comes back', async () => {
  const c = client();
  const answer = await new Promise<Buffer>((resolve, reject) => {
    const call = (c.ClientStream as (cb: grpc.requestCallback<Buffer>) => grpc.ClientWritableStream<Buffer>)((err, value) =>
      err ? reject(err) : resolve(value!),
    );
    for (let i = 0; i < 200; i++) call.write(Buffer.alloc(4096, i));
    call.end();
  });
  c.close();
  expect(answer.toString()).toBe(`200 messages, ${200 * 4096} bytes`);
});

test('bidirectional streaming: each message is answered while the call stays open', async () => {
  const c = client();
  const call = (c.Bidi as () => grpc.ClientDuplexStream<Buffer, Buffer>)();
  const replies: string[] = [];
  // One at a time: the next is written only after the answer to the previous one came back through the gateway.
  for (const word of ['one', 'two', 'three']) {
    const reply = new Promise<Buffer>((resolve) => call.once('data', resolve));
    call.write(Buffer.from(word));
    replies.push((await reply).toString());
  }
  call.end();
  const status = await new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  c.close();
  expect(replies).toEqual(['re:one', 're:two', 're:three']);
  expect(status.code).toBe(grpc.status.OK);
});

test('a call the client cancels is cancelled at the upstream too (the reset goes through)', async () => {
  const before = cancelled;
  const c = client();
  const pending = unary(c, 'Hang', Buffer.from('wait'));
  // The call is at the upstream once the upstream's handler has run; no event says so, so wait for its arrival.
  await new Promise((resolve) => setTimeout(resolve, 300));
  pending.call.cancel();
  const { error } = await pending;
  c.close();
  expect(error?.code).toBe(grpc.status.CANCELLED);
  await pollUntil(async () => (cancelled > before ? true : undefined), { timeoutMs: 5_000, what: 'the upstream seeing the call cancelled' });
});

test("the route's response_header_timeout bounds the wait for the upstream's answer", async () => {
  const c = client('slow.grpc.test');
  const started = Date.now();
  const { error } = await unary(c, 'Hang', Buffer.from('wait'));
  c.close();
  // The gateway's own UPSTREAM_TIMEOUT, as a gRPC status (proto/src/errors.ts).
  expect(error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  expect(error?.details).toBe('gateway timeout');
  expect(Date.now() - started).toBeLessThan(5_000);
});

test('an HTTP/1.1 client reaches an h2c-only upstream through an http2 route', async () => {
  const res = await https('/plain/hello?x=1');
  expect(res.status).toBe(200);
  expect(res.headers['x-upstream-version']).toBe('2.0');
  expect(res.headers['x-seen-authority']).toBe(`127.0.0.1:${(h2c.address() as { port: number }).port}`);
  expect(res.body.toString()).toBe('GET /plain/hello?x=1 https');
});

test("1 MiB then trailers, read slowly by an h2 client: every byte, then the upstream's trailers", async () => {
  const session = connectHttp2(`https://127.0.0.1:${dp.proxyPort}`, { ca });
  try {
    const stream = session.request({ ':path': '/plain/big' });
    const trailers = new Promise<IncomingHttpHeaders>((resolve) => stream.once('trailers', resolve));
    const chunks: Buffer[] = [];
    let slowed = false;
    stream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (!slowed) {
        slowed = true;
        stream.pause();
        setTimeout(() => stream.resume(), 500);
      }
    });
    await new Promise((resolve) => stream.on('end', resolve));
    const body = Buffer.concat(chunks);
    expect(body.length).toBe(BIG.length);
    expect(createHash('sha256').update(body).digest('hex')).toBe(BIG_DIGEST);
    expect((await trailers)['x-digest']).toBe(BIG_DIGEST);
  } finally {
    session.close();
  }
});

test('a client that stops reading a large answer does not stall the other requests sharing its upstream connection', async () => {
  // Its unread bytes fill its own stream's flow-control window on the one h2 connection to the upstream; were they
  // to hold the connection's window too, every other request to that upstream would wait behind them.
  const session = connectHttp2(`https://127.0.0.1:${dp.proxyPort}`, { ca });
  try {
    const stuck = session.request({ ':path': '/plain/big' });
    await new Promise((resolve) => stuck.once('response', resolve));
    stuck.pause();
    // Time for the gateway to fill what the stuck client and the upstream stream will buffer.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const res = await https('/plain/hello');
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('GET /plain/hello https');
  } finally {
    session.destroy();
  }
});

test('the active health check probes over h2 too: the h2c-only target stays in, the dead one is taken out', async () => {
  // Round robin over two targets: with the dead one out of rotation every request succeeds.
  await pollUntil(
    async () => {
      const statuses = await Promise.all([0, 1, 2, 3].map(() => https('/plain/x').then((r) => r.status)));
      return statuses.every((s) => s === 200) ? statuses : undefined;
    },
    { timeoutMs: 10_000, what: 'every request answered by the live h2c target' },
  );
});

test('an active gRPC health check takes out the target that reports NOT_SERVING, though it answers calls', async () => {
  const c = client('checked.grpc.test');
  try {
    await pollUntil(
      async () => {
        const origins = [];
        for (let i = 0; i < 4; i++) origins.push((await unary(c, 'Unary', Buffer.from('?'))).header?.get('x-origin')[0]);
        return origins.every((o) => o === 'h2c') ? origins : undefined;
      },
      { what: 'every call answered by the serving target', timeoutMs: 10_000 },
    );
  } finally {
    c.close();
  }
});

test("requests beyond a connection's stream limit go on another connection rather than wait behind long calls", async () => {
  // The upstream answers only when 4 are in flight together; it takes 2 per connection. A first one in flight
  // alone opens the first connection, which learns that limit from the server's SETTINGS.
  const first = https('/narrow/0');
  await pollUntil(async () => (narrowSessions.size === 1 ? true : undefined), { what: 'the first connection' });
  const answers = await Promise.all([first, ...[1, 2, 3].map((i) => https(`/narrow/${i}`))]);
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
  expect(answers.map((a) => a.body.toString())).toEqual(Array(4).fill('in flight together: 0'));
  expect(narrowSessions.size).toBe(2);
});

test('an http2 route whose upstream refuses connections answers 502', async () => {
  const res = await https('/dead/x');
  expect(res.status).toBe(502);
});

/** A gRPC-Web response body: its message frames, then its trailers' frame (flag 0x80) parsed, if any. */
function webFrames(body: Buffer): { messages: string[]; trailers: Record<string, string> | null } {
  const messages: string[] = [];
  let trailers: Record<string, string> | null = null;
  for (let at = 0; at < body.length; ) {
    const flag = body[at]!;
    const length = body.readUInt32BE(at + 1);
    const payload = body.subarray(at + 5, at + 5 + length);
    at += 5 + length;
    if (flag & 0x80) {
      trailers = Object.fromEntries(
        payload
          .toString('latin1')
          .split('\r\n')
          .filter(Boolean)
          .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1)]),
      );
    } else messages.push(payload.toString());
  }
  return { messages, trailers };
}

const web = (path: string, type: string, body: Buffer | string) =>
  httpRequest(`https://127.0.0.1:${dp.proxyPort}${path}`, { method: 'POST', ca, headers: { 'content-type': type, 'x-grpc-web': '1' }, body });

describe('grpc_web', () => {
  test("a gRPC-Web unary call over HTTP/1.1: translated to gRPC, the trailers come back as the body's last frame", async () => {
    const res = await web('/test.Echo/Unary', 'application/grpc-web+proto', frame('hello'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/grpc-web+proto');
    expect(res.headers['x-origin']).toBe('h2c');
    expect(res.headers['grpc-status']).toBeUndefined();
    const { messages, trailers } = webFrames(res.body);
    expect(messages).toEqual(['echo:hello']);
    expect(trailers).toMatchObject({ 'grpc-status': '0', 'x-digest': createHash('sha256').update('hello').digest('hex') });
    // The upstream saw a gRPC call.
    expect(seen.at(-1)!.get('x-grpc-web')).toEqual(['1']);
  });

  test('grpc-web-text: a request of separately padded base64 segments, a streamed answer in base64', async () => {
    const request = frame(JSON.stringify({ n: 3, size: 100 }));
    // A client encodes each part apart: padding may fall mid-body.
    const text = request.subarray(0, 7).toString('base64') + request.subarray(7).toString('base64');
    expect(text.slice(0, -1)).toContain('=');
    const res = await web('/test.Echo/ServerStream', 'application/grpc-web-text+proto', text);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/grpc-web-text+proto');
    const { messages, trailers } = webFrames(Buffer.from(res.body.toString(), 'base64'));
    expect(messages.map((m) => m.length)).toEqual([100, 100, 100]);
    expect(trailers).toMatchObject({ 'grpc-status': '0', 'x-count': '3' });
  });

  test("an upstream's Trailers-Only error: its status in the headers over HTTP/1.1, in the last frame over h2", async () => {
    const overH1 = await web('/test.Echo/Fail', 'application/grpc-web+proto', frame('x'));
    expect(overH1.status).toBe(200);
    // grpc-message as the upstream wrote it (percent-encoded, as gRPC's HTTP/2 protocol asks).
    expect(overH1.headers).toMatchObject({ 'content-type': 'application/grpc-web+proto', 'grpc-status': '5', 'grpc-message': 'no%20such%20widget' });
    expect(overH1.body.length).toBe(0);

    const session = connectHttp2(`https://127.0.0.1:${dp.proxyPort}`, { ca });
    try {
      const stream = session.request({ ':method': 'POST', ':path': '/test.Echo/Fail', 'content-type': 'application/grpc-web+proto' });
      let httpTrailers: IncomingHttpHeaders | null = null;
      stream.on('trailers', (t) => (httpTrailers = t));
      const head = new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
      stream.end(frame('x'));
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      await new Promise((resolve) => stream.on('end', resolve));
      expect((await head)['grpc-status']).toBeUndefined();
      expect(webFrames(Buffer.concat(chunks)).trailers).toMatchObject({ 'grpc-status': '5', 'grpc-message': 'no%20such%20widget' });
      // Browsers cannot read HTTP trailers: nothing of the status is left there.
      expect(httpTrailers?.['grpc-status']).toBeUndefined();
    } finally {
      session.close();
    }
  });

  test('native gRPC clients of the same route are not translated', async () => {
    const c = client();
    const { error, value } = await unary(c, 'Unary', Buffer.from('native'));
    c.close();
    expect(error).toBeNull();
    expect(value!.toString()).toBe('echo:native');
  });

  test('grpc_web on an API whose upstream is HTTP/1.1 is refused, naming the plugin', async () => {
    const res = await admin.createApi({
      ...apiDefinition({ name: 'grpc-web-h1', listenPath: '/web-h1/*', targets: ['http://127.0.0.1:1'] }),
      plugins: [{ name: 'grpc_web' }],
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: expect.stringContaining('plugins[0] grpc_web needs proxy.upstreams.protocol "http2"') });
  });
});

describe("a plugin's answer to a gRPC call is a Trailers-Only gRPC response (HTTP status mapped as gRPC does)", () => {
  /** A unary call to `path` by a real grpc-js client: the status it ends with. */
  async function call(path: string): Promise<grpc.StatusObject> {
    const c = new EchoClient(`127.0.0.1:${dp.proxyPort}`, grpc.credentials.createSsl(ca)) as Echo;
    try {
      return await new Promise<grpc.StatusObject>((resolve) => {
        const started = c.makeUnaryRequest(path, same, same, Buffer.from('a'), () => undefined);
        started.on('status', resolve);
      });
    } finally {
      c.close();
    }
  }

  test("request_termination 503: UNAVAILABLE with the configured message, the gateway's request id as metadata; counted under both statuses", async () => {
    const before = await Promise.all([
      grpcCount('api:grpc-down', 14),
      metricValue(dp.statusUrl, 'gatehouse_proxy_requests_total{route="api:grpc-down",status="503"}'),
    ]);
    const status = await call('/down.Svc/Call');
    expect(status.code).toBe(grpc.status.UNAVAILABLE);
    expect(status.details).toBe(DOWN_MESSAGE);
    expect(status.metadata.get('x-request-id')[0]).toEqual(expect.any(String));
    const after = await Promise.all([
      grpcCount('api:grpc-down', 14),
      metricValue(dp.statusUrl, 'gatehouse_proxy_requests_total{route="api:grpc-down",status="503"}'),
    ]);
    expect(after.map((n, i) => n - before[i]!)).toEqual([1, 1]);
  });

  test('a 2xx answer (a body, no message) is no gRPC response: UNKNOWN with the reason phrase; a redirect too', async () => {
    expect(await call('/pong.Svc/Call')).toMatchObject({ code: grpc.status.UNKNOWN, details: 'OK' });
    const moved = await call('/moved.Svc/Call');
    expect(moved).toMatchObject({ code: grpc.status.UNKNOWN, details: 'Moved Permanently' });
    expect(moved.metadata.get('location')).toEqual([]);
  });

  test('gRPC-Web gets it in the headers, percent-encoded; a plain HTTP request still gets the HTTP answer', async () => {
    const res = await web('/down.Svc/Call', 'application/grpc-web+proto', frame('x'));
    expect(res.status).toBe(200);
    expect(res.headers).toMatchObject({
      'content-type': 'application/grpc-web',
      'grpc-status': '14',
      'grpc-message': 'down for maintenance: 100%25 %E2%9C%93',
    });
    expect(res.body.length).toBe(0);
    const plain = await https('/down.Svc/Call');
    expect(plain.status).toBe(503);
    expect(JSON.parse(plain.body.toString())).toBe(DOWN_MESSAGE);
  });
});
