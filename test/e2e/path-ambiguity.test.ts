/**
 * Request paths an upstream could read otherwise than the gateway routed them (docs/proxy.md "Proxy behaviour", Path
 * normalisation), against a real CP, DP and upstreams, over HTTP/1.1 and h2c: `..`, `%2e%2e` and `//` are normalised
 * (and the normalised path forwarded); a raw `\`, a dot segment with parameters (`..;`) and a dot segment between
 * encoded slashes are refused with AMBIGUOUS_PATH on every route; `%2F` / `%5C` are refused unless the API sets
 * `proxy.allow_encoded_slashes`, and then forwarded as sent.
 */
import { request as httpRequestRaw } from 'node:http';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { h2Request, h2Session } from '../helpers/h2-client.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let plain: Upstream;
let files: Upstream;

beforeAll(async () => {
  [plain, files] = await Promise.all([startUpstream('plain', { kind: 'echo' }), startUpstream('files', { kind: 'echo' })]);
  gw = await startGateway();
  const encodedSlashes = apiDefinition({ name: 'files', listenPath: '/files/*', targets: [files.url] });
  (encodedSlashes.proxy as Record<string, unknown>).allow_encoded_slashes = true;
  await createApis(gw, [
    // The shape of the probe: an open route whose upstream resolves `..;` and would then serve /jwt/x without the jwt route's checks.
    apiDefinition({ name: 'plain', listenPath: '/plain/*', targets: [`${plain.url}/base`], stripPath: true }),
    apiDefinition({ name: 'jwt', listenPath: '/jwt/*', targets: [plain.url], plugins: [{ name: 'key_auth', config: {} }] }),
    encodedSlashes,
  ]);
}, 90_000);

afterAll(async () => {
  const problems = await gw?.stop();
  await Promise.all([plain?.close(), files?.close()]);
  expect(problems).toBe('');
});

interface Answer {
  status: number;
  body: string;
}

/** One HTTP/1.1 GET with the request target exactly as given (a URL object would resolve `\`, `..` and `%2e` itself). */
function http1Get(path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequestRaw({ host: '127.0.0.1', port: gw.dp.proxyPort, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function h2Get(path: string): Promise<Answer> {
  const s = await h2Session(`http://127.0.0.1:${gw.dp.proxyPort}`);
  try {
    const got = await h2Request(s, { ':path': path, ':method': 'GET' });
    return { status: got.status, body: got.body.toString() };
  } finally {
    s.close();
  }
}

const protocols = [
  ['HTTP/1.1', http1Get],
  ['h2c', h2Get],
] as const;

const urlOf = (answer: Answer): string => (JSON.parse(answer.body) as RecordedRequest).url;

describe.each(protocols)('over %s', (_protocol, get) => {
  test.each([
    ['..', '/jwt/../plain/x', '/base/x'],
    ['%2e%2e', '/jwt/%2e%2e/plain/x', '/base/x'],
    ['%2E.', '/jwt/%2E./plain/x', '/base/x'],
    ['//', '//plain//x', '/base/x'],
  ])('%s is normalised before routing, and the normalised path is forwarded: %s', async (_form, path, forwarded) => {
    const got = await get(path);
    expect(got.status).toBe(200);
    expect(urlOf(got)).toBe(forwarded);
  });

  test.each([
    ['a dot segment with parameters', '/plain/..;/jwt/x'],
    ['an encoded dot segment with parameters', '/plain/%2e%2e;/jwt/x'],
    ['a dot segment with encoded parameters', '/plain/..%3B/jwt/x'],
    ['a raw backslash', '/plain/..\\jwt/x'],
    ['an encoded slash', '/plain/..%2Fjwt/x'],
    ['an encoded slash in lower case', '/plain/a%2fb'],
    ['an encoded backslash', '/plain/..%5Cjwt/x'],
    ['an encoded slash on an API that allows them, around a dot segment', '/files/a%2F..%2F..%2Fjwt/x'],
    ['a dot segment with parameters on an API that allows encoded slashes', '/files/..;/jwt/x'],
    ['a dot segment with parameters on no route', '/nowhere/..;/x'],
  ])('%s is refused with 400 AMBIGUOUS_PATH and reaches no upstream: %s', async (_form, path) => {
    const before = [plain.requests.length, files.requests.length];
    const got = await get(path);
    expect(got.status).toBe(400);
    expect(got.body).toBe('"ambiguous request path"');
    expect([plain.requests.length, files.requests.length]).toEqual(before);
  });

  test.each([
    ['%2F', '/files/a%2Fb', '/files/a%2Fb'],
    ['%2f (escapes upper-cased)', '/files/a%2fb', '/files/a%2Fb'],
    ['%5C', '/files/a%5Cb', '/files/a%5Cb'],
  ])('an API with proxy.allow_encoded_slashes forwards %s as sent: %s', async (_form, path, forwarded) => {
    const got = await get(path);
    expect(got.status).toBe(200);
    expect(urlOf(got)).toBe(forwarded);
  });
});

test('the refusal is logged with its code and reason', async () => {
  await http1Get('/plain/..;/jwt/logged');
  const line = await pollUntil(async () => gw.dp.process.lines().find((l) => l.json?.code === 'AMBIGUOUS_PATH' && String(l.json?.path).includes('logged')), {
    what: 'the AMBIGUOUS_PATH log line',
    timeoutMs: 5_000,
  });
  expect(line.json).toMatchObject({ msg: 'gateway error', err: 'request path holds a dot segment with parameters' });
});

test('proxy.allow_encoded_slashes is stored only when true, and refused when not a boolean', async () => {
  expect((await gw.admin.getApi('files')).body).toMatchObject({ proxy: { allow_encoded_slashes: true } });
  expect((await gw.admin.getApi('plain')).body).not.toHaveProperty('proxy.allow_encoded_slashes');
  const bad = apiDefinition({ name: 'bad-slashes', listenPath: '/bad/*', targets: [files.url] });
  (bad.proxy as Record<string, unknown>).allow_encoded_slashes = 'yes';
  const refused = await gw.admin.createApi(bad);
  expect(refused.status).toBe(400);
  expect(JSON.stringify(refused.body)).toContain('proxy.allow_encoded_slashes');
});

test('POST /explain tells the same refusal the proxy answers', async () => {
  const explain = (path: string) => gw.admin.request('POST', '/explain', { body: { method: 'GET', path } });
  expect((await explain('/plain/..;/jwt/x')).body).toMatchObject({
    route: { name: 'plain' },
    refused: { code: 'AMBIGUOUS_PATH', message: 'request path holds a dot segment with parameters' },
  });
  expect((await explain('/plain/a%2Fb')).body).toMatchObject({ refused: { code: 'AMBIGUOUS_PATH' } });
  expect((await explain('/files/a%2Fb')).body).not.toHaveProperty('refused');
});
