/**
 * What the upstream actually receives through a real data plane (docs/proxy.md "Proxy behaviour" "Forwarded request"):
 * every row of the rewrite table, query merge, Host and X-Forwarded-* headers, X-Request-Id,
 * hop-by-hop removal, 5 MB bodies both ways, insecure_skip_verify towards an HTTPS upstream the
 * gateway does not trust, and the gateway's own 404/502/504 responses.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import type { RecordedRequest } from '../helpers/upstream-server.js';
import { freePort } from '../helpers/free-port.js';
import { httpRequest } from '../helpers/http-request.js';
import { REPO_ROOT } from '../helpers/service-process.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { createTestCertificates, type CertificateFiles } from '../helpers/test-certificates.js';

const FIVE_MB = 5 * 1024 * 1024;

let gw: Gateway;
let u: Upstream;
/** HTTPS upstream whose certificate chains to a CA the data plane does not know. */
let untrusted: Upstream;
let certs: CertificateFiles;

/** One API per rewrite row, told apart by Host so that the docs/proxy.md table's own listen paths can repeat. */
interface RewriteRow {
  row: string;
  listenPath: string;
  /** `U` stands for the upstream's origin (http://127.0.0.1:<port>). */
  target: string;
  strip?: boolean;
  append?: boolean;
  /** proxy.allow_encoded_slashes. */
  allowEncodedSlashes?: boolean;
  method: string;
  request: string;
  upstream: string;
}

const REWRITE_ROWS: RewriteRow[] = [
  {
    row: 'SPEC row 1 / seed rule 9: target without path gets the client URI',
    listenPath: '/foo/*',
    target: 'U',
    method: 'GET',
    request: '/foo/bar?x=1',
    upstream: '/foo/bar?x=1',
  },
  {
    row: 'SPEC row 2 / seed rule 10: strip_path',
    listenPath: '/service/*',
    target: 'U',
    strip: true,
    method: 'GET',
    request: '/service/a/b',
    upstream: '/a/b',
  },
  {
    row: 'SPEC row 3 / seed rule 12: append_path',
    listenPath: '/service/*',
    target: 'U/example',
    append: true,
    method: 'GET',
    request: '/service/a',
    upstream: '/example/service/a',
  },
  // A host placeholder never names a loopback address (host-placeholders.test.ts), so the authority's parameter here is the port.
  {
    row: 'SPEC row 4 / seed rule 11: strip with a parameter in the authority',
    listenPath: '/prepath/{port}/*',
    target: 'http://127.0.0.1:{port}',
    strip: true,
    method: 'GET',
    request: '/prepath/PORT/a',
    upstream: '/a',
  },
  {
    row: 'SPEC row 5 / seed rule 8: regex parameter into the target path',
    listenPath: '/api/recipes/{id:[\\da-f]{24}}',
    target: 'U/recipes/{id}',
    method: 'GET',
    request: '/api/recipes/5252b1b5301bbf46038b473f',
    upstream: '/recipes/5252b1b5301bbf46038b473f',
  },
  {
    row: 'SPEC row 6: exact listen path with strip',
    listenPath: '/auth/token',
    target: 'U/token',
    strip: true,
    method: 'POST',
    request: '/auth/token',
    upstream: '/token',
  },
  {
    row: 'strip_path keeps the query string',
    listenPath: '/strip-query/*',
    target: 'U',
    strip: true,
    method: 'GET',
    request: '/strip-query/a?x=1&y=2',
    upstream: '/a?x=1&y=2',
  },
  { row: 'strip_path down to nothing gives /', listenPath: '/emptied/*', target: 'U', strip: true, method: 'GET', request: '/emptied', upstream: '/' },
  {
    row: 'strip_path joined to a target path ending in / (no doubled slash)',
    listenPath: '/joined/*',
    target: 'U/base/',
    strip: true,
    method: 'GET',
    request: '/joined/a/b',
    upstream: '/base/a/b',
  },
  {
    row: 'append_path with a target path ending in / (no doubled slash)',
    listenPath: '/appended/*',
    target: 'U/example/',
    append: true,
    method: 'GET',
    request: '/appended/a',
    upstream: '/example/appended/a',
  },
  {
    row: 'target with a path, no strip, no append: the target path',
    listenPath: '/fixed/*',
    target: 'U/only',
    method: 'GET',
    request: '/fixed/anything/here',
    upstream: '/only',
  },
  {
    row: 'target query comes first, client query appended with &',
    listenPath: '/merged/*',
    target: 'U/q?fixed=1',
    method: 'GET',
    request: '/merged/x?y=2',
    upstream: '/q?fixed=1&y=2',
  },
  {
    row: 'target query alone when the client sends none',
    listenPath: '/merged-alone/*',
    target: 'U/q?fixed=1',
    method: 'GET',
    request: '/merged-alone/x',
    upstream: '/q?fixed=1',
  },
  {
    row: 'percent-encoding is forwarded as received',
    listenPath: '/encoded/*',
    target: 'U',
    method: 'GET',
    request: '/encoded/a%20b/c%3Fd?q=%26x',
    upstream: '/encoded/a%20b/c%3Fd?q=%26x',
  },
  {
    row: 'an encoded slash is forwarded as received where the API allows it',
    listenPath: '/encoded-slash/*',
    target: 'U',
    allowEncodedSlashes: true,
    method: 'GET',
    request: '/encoded-slash/a%20b/c%2Fd?q=%26x',
    upstream: '/encoded-slash/a%20b/c%2Fd?q=%26x',
  },
];

const rowHost = (index: number): string => `row${index}.rewrite.test`;

function resolveTarget(template: string): string {
  return template.replace(/^U/, u.url).replace('PORT', String(u.port));
}

/** Sends through the gateway and returns what the upstream recorded for exactly that request. */
async function forwarded(method: string, path: string, headers: Record<string, string> = {}, body?: Buffer | string): Promise<RecordedRequest> {
  const before = u.requests.length;
  const res = await gw.dp.request(method, path, { headers, body });
  if (res.status !== 200) throw new Error(`${method} ${path} → ${res.status} ${res.text.slice(0, 200)}`);
  expect(u.requests.length).toBe(before + 1);
  return u.requests[before];
}

beforeAll(async () => {
  u = await startUpstream('forwarding');
  // The path decides how the upstream answers.
  u.setBehaviour((req) => {
    if (req.url.startsWith('/big-response')) return { kind: 'big', bytes: FIVE_MB };
    if (req.url.startsWith('/slow/hang')) return { kind: 'hang' };
    if (req.url.startsWith('/slow/quick')) return { kind: 'delay', ms: 50 };
    if (req.url.startsWith('/status/created')) return { kind: 'fixed', status: 201, body: '{"made":true}', headers: { 'x-custom-response': 'yes' } };
    return { kind: 'echo' };
  });
  certs = await createTestCertificates();
  untrusted = await startUpstream(
    'untrusted-tls',
    { kind: 'fixed' },
    {
      tls: { cert: await readFile(certs.serverCert), key: await readFile(certs.serverKey) },
    },
  );
  gw = await startGateway();
  const definitions = [
    ...REWRITE_ROWS.map((row, i) =>
      apiDefinition({
        name: `row-${i}`,
        hosts: [rowHost(i)],
        listenPath: row.listenPath,
        targets: [resolveTarget(row.target)],
        stripPath: row.strip,
        appendPath: row.append,
        allowEncodedSlashes: row.allowEncodedSlashes,
      }),
    ),
    apiDefinition({ name: 'plain', listenPath: '/plain/*', targets: [u.url] }),
    apiDefinition({ name: 'preserve', listenPath: '/preserve/*', targets: [u.url], preserveHost: true }),
    apiDefinition({ name: 'big-response', listenPath: '/big-response/*', targets: [u.url] }),
    apiDefinition({ name: 'status', listenPath: '/status/*', targets: [u.url] }),
    apiDefinition({ name: 'down', listenPath: '/down/*', targets: [`http://127.0.0.1:${await freePort()}`] }),
    apiDefinition({ name: 'slow', listenPath: '/slow/*', targets: [u.url], responseHeaderTimeout: '300ms' }),
    apiDefinition({ name: 'tls-skip', listenPath: '/tls-skip/*', targets: [untrusted.url], insecureSkipVerify: true }),
    apiDefinition({ name: 'tls-verify', listenPath: '/tls-verify/*', targets: [untrusted.url] }),
  ];
  await createApis(gw, definitions);
});

afterAll(async () => {
  const problems = await gw?.stop();
  await u?.close();
  await untrusted?.close();
  await certs?.dispose();
  expect(problems ?? '').toBe('');
});

describe('rewrite (SPEC §4 table): path and query the upstream receives', () => {
  test.each(REWRITE_ROWS.map((row, index) => ({ ...row, index })))('$row: $method $request → $upstream', async ({ index, method, request, upstream }) => {
    const received = await forwarded(method, request.replace('PORT', String(u.port)), { host: rowHost(index) });
    expect(received.method).toBe(method);
    expect(received.url).toBe(upstream);
    expect(received.headers.host).toBe(u.hostHeader);
  });

  test('a placeholder value that is not a port number is a 400 and never reaches any upstream', async () => {
    const prepath = REWRITE_ROWS.findIndex((row) => row.listenPath === '/prepath/{port}/*');
    for (const value of ['a_b', `${u.port}%40127.0.0.1`, `${u.port}:1234`, '123456']) {
      const before = u.requests.length;
      const res = await gw.dp.request('GET', `/prepath/${value}/a`, { headers: { host: rowHost(prepath) } });
      expect({ value, status: res.status }).toEqual({ value, status: 400 });
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(u.requests.length).toBe(before);
    }
  });
});

describe('request headers', () => {
  test('Host is the target host by default', async () => {
    const received = await forwarded('GET', '/plain/a', { host: 'client.example.test' });
    expect(received.headers.host).toBe(u.hostHeader);
  });

  test('preserve_host keeps the client Host', async () => {
    const received = await forwarded('GET', '/preserve/a', { host: 'client.example.test:1234' });
    expect(received.headers.host).toBe('client.example.test:1234');
  });

  test('X-Forwarded-For/Proto/Host are added', async () => {
    const received = await forwarded('GET', '/plain/xf', { host: 'front.example.test' });
    expect(received.headers['x-forwarded-for']).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
    expect(received.headers['x-forwarded-proto']).toBe('http');
    expect(received.headers['x-forwarded-host']).toBe('front.example.test');
  });

  test("X-Forwarded-For is appended to; a client's X-Forwarded-Proto/Host are replaced (no TRUSTED_PROXIES: the client is the TCP peer)", async () => {
    const received = await forwarded('GET', '/plain/xf', {
      host: 'front.example.test',
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'evil.test',
    });
    expect(received.headers['x-forwarded-for']).toMatch(/^203\.0\.113\.7, ?(::ffff:)?127\.0\.0\.1$/);
    expect(received.headers['x-forwarded-proto']).toBe('http');
    expect(received.headers['x-forwarded-host']).toBe('front.example.test');
  });

  test('X-Request-Id is generated when absent, sent upstream and returned to the client', async () => {
    const first = await gw.dp.request('GET', '/plain/id1');
    const second = await gw.dp.request('GET', '/plain/id2');
    const upstreamIds = u.requests.slice(-2).map((r) => r.headers['x-request-id']);
    expect(typeof first.headers['x-request-id']).toBe('string');
    expect(first.headers['x-request-id']).not.toBe('');
    expect(upstreamIds).toEqual([first.headers['x-request-id'], second.headers['x-request-id']]);
    expect(first.headers['x-request-id']).not.toBe(second.headers['x-request-id']);
  });

  test('X-Request-Id sent by the client is kept', async () => {
    const res = await gw.dp.request('GET', '/plain/id3', { headers: { 'x-request-id': 'client-id-123' } });
    expect(res.status).toBe(200);
    expect(u.last()?.headers['x-request-id']).toBe('client-id-123');
    expect(res.headers['x-request-id']).toBe('client-id-123');
  });

  test('hop-by-hop headers are removed, end-to-end headers kept', async () => {
    const received = await forwarded('GET', '/plain/hop', {
      connection: 'close, x-hop-test',
      'x-hop-test': 'must not pass',
      'keep-alive': 'timeout=5',
      'proxy-authorization': 'Basic c2VjcmV0',
      'x-end-to-end': 'kept',
      authorization: 'Bearer unchanged-token',
    });
    expect(received.headers['x-hop-test']).toBeUndefined();
    expect(received.headers['keep-alive']).toBeUndefined();
    expect(received.headers['proxy-authorization']).toBeUndefined();
    expect(received.headers['x-end-to-end']).toBe('kept');
    expect(received.headers.authorization).toBe('Bearer unchanged-token');
  });
});

describe('bodies and responses', () => {
  test('method and a small body are forwarded', async () => {
    const received = await forwarded('PUT', '/plain/put', { 'content-type': 'text/plain' }, 'hello');
    expect(received.method).toBe('PUT');
    expect(received.bodyLength).toBe(5);
    expect(received.bodySha256).toBe(createHash('sha256').update('hello').digest('hex'));
  });

  test('5 MB request body arrives intact', async () => {
    const body = randomBytes(FIVE_MB);
    const received = await forwarded('POST', '/plain/upload', { 'content-type': 'application/octet-stream' }, body);
    expect(received.bodyLength).toBe(FIVE_MB);
    expect(received.bodySha256).toBe(createHash('sha256').update(body).digest('hex'));
  });

  test('5 MB response body arrives intact', async () => {
    const res = await gw.dp.request('GET', '/big-response/file');
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(FIVE_MB);
    expect(res.sha256).toBe(u.bigBodySha256(FIVE_MB));
  });

  test('upstream status, headers and body are returned as sent', async () => {
    const res = await gw.dp.request('POST', '/status/created');
    expect(res.status).toBe(201);
    expect(res.headers['x-custom-response']).toBe('yes');
    expect(res.text).toBe('{"made":true}');
  });
});

describe('HTTPS upstream with a certificate the gateway does not trust', () => {
  test('insecure_skip_verify: true → served', async () => {
    const res = await gw.dp.request('GET', '/tls-skip/a');
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ upstream: 'untrusted-tls', url: '/tls-skip/a' });
  });

  test('for that API only: another API to the same upstream verifies and fails with 502', async () => {
    const before = untrusted.requests.length;
    const res = await gw.dp.request('GET', '/tls-verify/a');
    expect(res.status).toBe(502);
    expect(res.text).toBe('"bad gateway"');
    expect(untrusted.requests.length).toBe(before);
  });
});

describe("the gateway's own errors", () => {
  test('no API: 404 "no API found with those values"', async () => {
    const res = await gw.dp.request('GET', '/nothing/here');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.text).toBe('"no API found with those values"');
  });

  test('upstream refuses the connection: 502 "bad gateway"', async () => {
    const res = await gw.dp.request('GET', '/down/a');
    expect(res.status).toBe(502);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.text).toBe('"bad gateway"');
  });

  test('upstream never answers: 504 "gateway timeout" after response_header_timeout', async () => {
    const started = Date.now();
    const res = await gw.dp.request('GET', '/slow/hang');
    const elapsed = Date.now() - started;
    expect(res.status).toBe(504);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.text).toBe('"gateway timeout"');
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(5_000);
  });

  test('an upstream answering within response_header_timeout is served', async () => {
    const res = await gw.dp.request('GET', '/slow/quick');
    expect(res.status).toBe(200);
  });
});

describe("the bench's bare proxy sending SPEC's headers (scripts/bare-undici-proxy.mjs spec)", () => {
  // docs/benchmarks.md "Instructions per request": the DP's instructions per request are compared with this
  // proxy's, which is a fair floor only while it sends what the DP sends. A header the DP comes to add (or drop) fails here.
  test('the upstream gets the header names and forwarding values the DP sends (traceparent apart), and the client its X-Request-Id', async () => {
    const port = await freePort();
    const bare = spawn(process.execPath, ['scripts/bare-undici-proxy.mjs', String(port), u.url, 'spec'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const [line] = (await once(bare.stdout, 'data')) as [Buffer];
      expect(line.toString()).toBe('ready\n');
      const headers = {
        host: 'front.example.test',
        'x-forwarded-for': '203.0.113.7',
        connection: 'keep-alive, x-secret',
        'x-secret': 'hop',
        'keep-alive': 'timeout=5',
      };
      const viaDp = await forwarded('GET', '/plain/spec', headers);
      const before = u.requests.length;
      const res = await httpRequest(`http://127.0.0.1:${port}/plain/spec`, { headers });
      expect(res.status).toBe(200);
      const viaBare = u.requests[before]!;
      const names = (r: RecordedRequest): string[] =>
        Object.keys(r.headers)
          .filter((name) => name !== 'traceparent')
          .sort();
      expect(names(viaBare)).toEqual(names(viaDp));
      expect(names(viaBare)).not.toContain('x-secret');
      for (const name of ['host', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host'])
        expect({ name, value: viaBare.headers[name] }).toEqual({ name, value: viaDp.headers[name] });
      expect(res.headers['x-request-id']).toBe(viaBare.headers['x-request-id']);
    } finally {
      bare.kill();
    }
  });
});
