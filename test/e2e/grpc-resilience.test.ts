/**
 * gRPC-aware resilience (docs/proxy.md "gRPC and HTTP/2 upstreams", "retry", "cb", "Upstream health checks"): real
 * @grpc/grpc-js clients and servers through a real data plane (h2c) whose retry, cb and passive health checks see
 * a Trailers-Only answer's grpc-status, and whose exchange is bounded by the call's grpc-timeout. The deadline's
 * exact wire effects (the gateway's own DEADLINE_EXCEEDED, the grpc-timeout the upstream is given, its stream
 * cancelled) are read at a node:http2 upstream that ignores deadlines and a node:http2 client without a timer of
 * its own: a grpc-js server and client would each end the call at the deadline themselves, hiding the gateway's part.
 */
import * as grpc from '@grpc/grpc-js';
import { once } from 'node:events';
import { connect as connectHttp2, createServer as createH2cServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { frame, rawMethod } from '../helpers/grpc-raw.js';
import { delay, pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';

const ECHO = {
  Unary: rawMethod('Unary', false, false),
  Slow: rawMethod('Slow', false, false),
  ServerStream: rawMethod('ServerStream', false, true),
} satisfies grpc.ServiceDefinition;
const EchoClient = grpc.makeGenericClientConstructor(ECHO, 'Echo');
type Echo = InstanceType<typeof EchoClient> & Record<keyof typeof ECHO, (...args: unknown[]) => unknown>;

/** What a grpc-js upstream saw of one call. */
interface Seen {
  server: string;
  key: string;
  /** ms the call had left when it arrived (its grpc-timeout, as grpc-js reads it), Infinity without one. */
  leftMs: number;
  cancelled: boolean;
}
const seen: Seen[] = [];
const callsOf = (key: string) => seen.filter((s) => s.key === key);

/**
 * `flaky`: the first call of each x-key is answered UNAVAILABLE (Trailers-Only), the next ones OK (Unary) or after
 * 2 s (Slow). `down`: every call UNAVAILABLE. `up`: every call OK. ServerStream: UNAVAILABLE like Unary, but with
 * a request "late" sent after a first message, in the trailers.
 */
function implementation(server: 'flaky' | 'down' | 'up'): grpc.UntypedServiceImplementation {
  const record = (call: grpc.ServerUnaryCall<Buffer, Buffer> | grpc.ServerWritableStream<Buffer, Buffer>): Seen => {
    const deadline = call.getDeadline();
    const entry: Seen = { server, key: String(call.metadata.get('x-key')[0] ?? ''), leftMs: Number(deadline) - Date.now(), cancelled: false };
    call.on('cancelled', () => (entry.cancelled = true));
    seen.push(entry);
    return entry;
  };
  const unavailable = { code: grpc.status.UNAVAILABLE, details: `${server} is draining` };
  return {
    Unary(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
      const entry = record(call);
      const nth = callsOf(entry.key).length;
      if (server === 'down' || (server === 'flaky' && nth === 1)) callback(unavailable);
      else callback(null, Buffer.from(`${server}:${nth}`));
    },
    Slow(call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) {
      const entry = record(call);
      if (server === 'down' || (server === 'flaky' && callsOf(entry.key).length === 1)) {
        callback(unavailable);
        return;
      }
      const timer = setTimeout(() => callback(null, Buffer.from('late')), 2_000);
      call.on('cancelled', () => clearTimeout(timer));
    },
    ServerStream(call: grpc.ServerWritableStream<Buffer, Buffer>) {
      const entry = record(call);
      if (server === 'down' || (server === 'flaky' && callsOf(entry.key).length === 1)) {
        if (call.request.toString() === 'late') call.write(Buffer.from('first'));
        call.emit('error', unavailable);
        return;
      }
      call.write(Buffer.from('first'));
      call.end();
    },
  };
}

async function startGrpcServer(kind: 'flaky' | 'down' | 'up'): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server();
  server.addService(ECHO, implementation(kind));
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { server, port };
}

/** What the node:http2 upstream saw of one request: its headers, and the reset code its stream closed with. */
interface RawSeen {
  headers: IncomingHttpHeaders;
  closedWith: number | null;
}
const rawSeen: RawSeen[] = [];

let cp: ControlPlane;
let admin: AdminClient;
let dp: DataPlane;
const servers: grpc.Server[] = [];
/** A gRPC-shaped node:http2 upstream that ignores deadlines: answers OK after `x-delay` ms (2 s by default), or with `x-mode: stream` sends its head and a message at once, then nothing. */
let raw: Http2Server;

beforeAll(async () => {
  const [flaky, down, up] = await Promise.all([startGrpcServer('flaky'), startGrpcServer('down'), startGrpcServer('up')]);
  servers.push(flaky.server, down.server, up.server);
  raw = createH2cServer();
  raw.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    const entry: RawSeen = { headers, closedWith: null };
    rawSeen.push(entry);
    stream.resume();
    if (headers['x-mode'] === 'stream') {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      stream.write(frame('first'));
    }
    const timer = setTimeout(
      () => {
        if (stream.headersSent) stream.end();
        else stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
      },
      Number(headers['x-delay'] ?? 2_000),
    );
    stream.on('close', () => {
      clearTimeout(timer);
      entry.closedWith = stream.rstCode ?? 0;
    });
  });
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));

  cp = await startControlPlane();
  admin = await createAdminClient(cp);
  const at = (port: number) => `http://127.0.0.1:${port}`;
  const grpcApi = (name: string, targets: string[], plugins: unknown[] = []) =>
    apiDefinition({ name, hosts: [`${name}.test`], listenPath: '/test.Echo/*', targets, protocol: 'http2', plugins });
  const passive = grpcApi('passive', [at(down.port), at(up.port)]);
  (passive.proxy as { upstreams: Record<string, unknown> }).upstreams.health_check = { passive: { unhealthy_threshold: 2, ejection: '1h' } };
  const apis = [
    grpcApi('retry', [at(flaky.port)], [{ name: 'retry', config: { attempts: 3, backoff: '300ms', grpc_statuses: ['unavailable'] } }]),
    grpcApi(
      'cb',
      [at(down.port)],
      [{ name: 'cb', config: { consecutive_failures: 3, sleep_window: 60_000, predicate: 'statusCode == 0 || grpcStatus == 14' } }],
    ),
    passive,
    apiDefinition({ name: 'raw', listenPath: '/raw.Svc/*', targets: [at((raw.address() as { port: number }).port)], protocol: 'http2' }),
  ];
  for (const api of apis) expect((await admin.createApi(api)).status).toBe(201);
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr });
}, 90_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  for (const server of servers) server.forceShutdown();
  await new Promise((resolve) => (raw ? raw.close(resolve) : resolve(undefined)));
});

/** A grpc-js client of the data plane's plain-text listener (h2c) for the API of `host`. */
const client = (host: string) => new EchoClient(`127.0.0.1:${dp.proxyPort}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': host }) as Echo;

interface CallResult {
  error: grpc.ServiceError | null;
  value?: Buffer;
  ms: number;
}

function unary(c: Echo, name: 'Unary' | 'Slow', key: string, options: grpc.CallOptions = {}, request = Buffer.from('hi')): Promise<CallResult> {
  const metadata = new grpc.Metadata();
  metadata.set('x-key', key);
  const started = Date.now();
  return new Promise((resolve) => {
    (c[name] as (r: Buffer, m: grpc.Metadata, o: grpc.CallOptions, cb: grpc.requestCallback<Buffer>) => void)(request, metadata, options, (error, value) =>
      resolve({ error, value, ms: Date.now() - started }),
    );
  });
}

const key = (what: string) => `${what}-${Date.now()}-${Math.random()}`;

describe('retry', () => {
  test('a call answered UNAVAILABLE (Trailers-Only) is retried to success, its body resent, with the time left as grpc-timeout', async () => {
    const c = client('retry.test');
    const k = key('retry');
    const { error, value } = await unary(c, 'Unary', k, { deadline: Date.now() + 5_000 });
    c.close();
    expect(error).toBeNull();
    expect(value!.toString()).toBe('flaky:2');
    const [first, second] = callsOf(k);
    expect(callsOf(k)).toHaveLength(2);
    // The retry waited its backoff (300 ms, up to 450 with jitter): the second try was given that much less.
    expect(first!.leftMs).toBeGreaterThan(4_500);
    expect(first!.leftMs - second!.leftMs).toBeGreaterThanOrEqual(250);
  });

  test('only a Trailers-Only status is retried: one in the trailers, after a message, came too late', async () => {
    const c = client('retry.test');
    const stream = async (request: string) => {
      const metadata = new grpc.Metadata();
      const k = key(request);
      metadata.set('x-key', k);
      const call = (c.ServerStream as (r: Buffer, m: grpc.Metadata) => grpc.ClientReadableStream<Buffer>)(Buffer.from(request), metadata);
      const messages: string[] = [];
      call.on('data', (m: Buffer) => messages.push(m.toString()));
      call.on('error', () => undefined);
      const status = await new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
      return { code: status.code, messages, calls: callsOf(k).length };
    };
    const early = await stream('early');
    const late = await stream('late');
    c.close();
    expect(early).toEqual({ code: grpc.status.OK, messages: ['first'], calls: 2 });
    expect(late).toEqual({ code: grpc.status.UNAVAILABLE, messages: ['first'], calls: 1 });
  });

  test('a body is kept for a resend up to 64 KiB: a call with a larger one is not retried once it went upstream', async () => {
    const c = client('retry.test');
    const [small, big] = [key('small'), key('big')];
    const kept = await unary(c, 'Unary', small, {}, Buffer.alloc(60 * 1024, 's'));
    const { error } = await unary(c, 'Unary', big, {}, Buffer.alloc(100 * 1024, 'b'));
    c.close();
    expect(kept.error).toBeNull();
    expect(callsOf(small)).toHaveLength(2);
    expect(error?.code).toBe(grpc.status.UNAVAILABLE);
    expect(error?.details).toBe('flaky is draining');
    expect(callsOf(big)).toHaveLength(1);
  });
});

test('cb opens on Trailers-Only UNAVAILABLE answers (grpcStatus == 14), then refuses without calling the upstream', async () => {
  const c = client('cb.test');
  const k = key('cb');
  for (let i = 0; i < 3; i++) {
    const { error } = await unary(c, 'Unary', k);
    expect(error?.details).toBe('down is draining');
  }
  const refused = await unary(c, 'Unary', k);
  c.close();
  expect(refused.error?.code).toBe(grpc.status.UNAVAILABLE);
  expect(refused.error?.details).toBe('upstream circuit open');
  expect(callsOf(k)).toHaveLength(3);
});

test('a passive health check takes out the target answering UNAVAILABLE, as it would one answering 503', async () => {
  const c = client('passive.test');
  const k = key('passive');
  // Round robin: down, up, down: the second UNAVAILABLE in a row from `down` takes it out.
  for (let i = 0; i < 3; i++) await unary(c, 'Unary', k);
  const after = await Promise.all([0, 1, 2, 3].map(() => unary(c, 'Unary', k)));
  c.close();
  expect(after.map((r) => r.error)).toEqual([null, null, null, null]);
  expect(callsOf(k).map((s) => s.server)).toEqual(['down', 'up', 'down', 'up', 'up', 'up', 'up']);
  const line = await pollUntil(async () => dp.process.lines().find((l) => l.json?.msg === 'upstream target unhealthy'), { what: 'the unhealthy line' });
  expect(line.json!.reason).toBe('2 proxied requests failed in a row (the last: grpc-status 14 (UNAVAILABLE))');
});

describe('grpc-timeout', () => {
  /** A call to the node:http2 upstream as a gRPC client without a timer of its own sends it: the answer's head (Trailers-Only: the whole answer) and when it came. */
  async function rawCall(headers: Record<string, string>): Promise<{ head: IncomingHttpHeaders; ms: number; ended: Promise<number> }> {
    const session = connectHttp2(`http://127.0.0.1:${dp.proxyPort}`);
    const started = Date.now();
    const stream = session.request({ ':method': 'POST', ':path': '/raw.Svc/Call', 'content-type': 'application/grpc', te: 'trailers', ...headers });
    stream.end(frame('x'));
    stream.resume();
    const [head] = (await once(stream, 'response')) as [IncomingHttpHeaders];
    const ms = Date.now() - started;
    // A stream cut mid-answer is reset with an error code, which node's client reports as an 'error' event.
    stream.on('error', () => {});
    const ended = new Promise<number>((resolve) => stream.on('close', () => resolve(stream.rstCode ?? 0))).finally(() => session.close());
    return { head, ms, ended };
  }

  test('the gateway answers DEADLINE_EXCEEDED when it passes, cancels the upstream stream, and gave the upstream the time left; a malformed one is forwarded as sent', async () => {
    const before = rawSeen.length;
    const { head, ms, ended } = await rawCall({ 'grpc-timeout': '200m' });
    await ended;
    expect(head).toMatchObject({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '4', 'grpc-message': 'gateway timeout' });
    expect(ms).toBeGreaterThanOrEqual(190);
    expect(ms).toBeLessThan(1_500);
    const upstream = rawSeen[before]!;
    const forwarded = String(upstream.headers['grpc-timeout']);
    expect(forwarded).toMatch(/^\d+m$/);
    expect(parseInt(forwarded, 10)).toBeLessThan(200);
    await pollUntil(async () => (upstream.closedWith !== null ? true : undefined), { what: 'the upstream stream closed' });
    expect(upstream.closedWith).toBe(8); // NGHTTP2_CANCEL

    // A malformed one sets no deadline and is forwarded as sent, for the server to judge.
    const malformed = await rawCall({ 'grpc-timeout': '200 m', 'x-delay': '400' });
    expect(malformed.head[':status']).toBe(200);
    expect(malformed.ms).toBeGreaterThanOrEqual(390);
    expect(rawSeen.at(-1)!.headers['grpc-timeout']).toBe('200 m');
  });

  test('the deadline bounds the whole call: a stream still open when it passes is cut at both ends', async () => {
    const before = rawSeen.length;
    const { head, ms, ended } = await rawCall({ 'grpc-timeout': '300m', 'x-mode': 'stream' });
    expect(head[':status']).toBe(200);
    expect(ms).toBeLessThan(250);
    const started = Date.now();
    // Cut, not ended: a reset with NO_ERROR would read as a complete answer.
    expect(await ended).toBe(2); // NGHTTP2_INTERNAL_ERROR
    expect(Date.now() - started + ms).toBeLessThan(1_500);
    const upstream = rawSeen[before]!;
    await pollUntil(async () => (upstream.closedWith !== null ? true : undefined), { what: 'the upstream stream closed' });
    expect(upstream.closedWith).toBe(8);
  });

  test('grpc-js both ends: a retry after its backoff is given the time left; the deadline passes during it (the server sees it cancelled) or before it (not sent)', async () => {
    const c = client('retry.test');
    const k = key('deadline');
    const { error, ms } = await unary(c, 'Slow', k, { deadline: Date.now() + 1_000 });
    c.close();
    expect(error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(ms).toBeLessThan(1_800);
    const [first, second] = callsOf(k);
    expect(callsOf(k)).toHaveLength(2);
    expect(first!.leftMs).toBeLessThanOrEqual(1_000);
    // Backoff 300 ms (up to 450 with jitter) went by between the tries.
    expect(second!.leftMs).toBeLessThan(first!.leftMs - 250);
    await pollUntil(async () => (second!.cancelled ? true : undefined), { what: 'the upstream call cancelled', timeoutMs: 3_000 });

    // A deadline that passes during the backoff: the retry is not sent at all.
    const c2 = client('retry.test');
    const short = key('short');
    expect((await unary(c2, 'Slow', short, { deadline: Date.now() + 250 })).error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    c2.close();
    await delay(600);
    expect(callsOf(short)).toHaveLength(1);
  });
});
