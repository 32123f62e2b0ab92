/**
 * compression through a real control plane and data plane, against an upstream of this file's own
 * (it needs exact control over Content-Type, Content-Encoding, Content-Length and chunk timing):
 * gzip and br bodies decode to the upstream's bytes (a large chunked body too), negotiation from
 * Accept-Encoding, min_size, content_types, responses left alone (already encoded, HEAD, 204, 304,
 * no-transform, images), streamed chunks flushed as they come, a client abort reaching the
 * upstream, `enabled: false`, and a bad configuration refused with the store unchanged.
 */
import { randomBytes } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { brotliDecompressSync, constants, gunzipSync, gzipSync } from 'node:zlib';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';

let gw: Gateway;
let upstream: Server;
let upstreamUrl: string;

const JSON_BODY = Buffer.from(JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `item-${i}` })) }));
const SMALL_JSON = Buffer.from('{"ok":true}');
/** Text that compresses, 2 MiB, written in 64 KiB chunks without Content-Length. */
const BIG_TEXT = Buffer.from(Array.from({ length: 40_000 }, (_, i) => `line ${i} ${randomBytes(8).toString('hex')}\n`).join(''));
const PNG = randomBytes(4096);
/** Requests whose response the client left before it ended (set by /slow-stream). */
const upstreamClosedEarly: string[] = [];

function send(res: ServerResponse, status: number, headers: Record<string, string>, body?: Buffer): void {
  res.writeHead(status, body === undefined ? headers : { 'content-length': String(body.length), ...headers });
  res.end(body);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').replace(/^\/[^/]+/, '');
  switch (path) {
    case '/json':
      send(res, 200, { 'content-type': 'application/json', etag: '"v1"', 'accept-ranges': 'bytes' }, JSON_BODY);
      return;
    case '/small':
      send(res, 200, { 'content-type': 'application/json' }, SMALL_JSON);
      return;
    case '/custom':
      send(res, 200, { 'content-type': 'application/x-custom' }, SMALL_JSON);
      return;
    case '/png':
      send(res, 200, { 'content-type': 'image/png' }, PNG);
      return;
    case '/gzipped':
      send(res, 200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, gzipSync(JSON_BODY));
      return;
    case '/no-transform':
      send(res, 200, { 'content-type': 'application/json', 'cache-control': 'public, no-transform' }, JSON_BODY);
      return;
    case '/vary':
      send(res, 200, { 'content-type': 'application/json', vary: 'Origin' }, JSON_BODY);
      return;
    case '/204':
      send(res, 204, {});
      return;
    case '/304':
      send(res, 304, { etag: '"v1"' });
      return;
    case '/big': {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      let offset = 0;
      const next = (): void => {
        while (offset < BIG_TEXT.length) {
          const chunk = BIG_TEXT.subarray(offset, offset + 65_536);
          offset += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', next);
        }
        res.end();
      };
      next();
      return;
    }
    case '/events': {
      // One event, then nothing until the client has seen it (it asks /events-end).
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      eventStreams.push(res);
      return;
    }
    case '/events-end':
      for (const s of eventStreams.splice(0)) s.end('data: last\n\n');
      send(res, 200, { 'content-type': 'text/plain' }, Buffer.from('ended'));
      return;
    case '/slow-stream': {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => res.write('tick '.repeat(100)), 20);
      res.on('close', () => {
        clearInterval(timer);
        if (!res.writableEnded) upstreamClosedEarly.push(req.url ?? '');
      });
      return;
    }
    default:
      send(res, 404, { 'content-type': 'text/plain' }, Buffer.from('unknown'));
      return;
  }
}
const eventStreams: ServerResponse[] = [];

const api = (name: string, plugin: Record<string, unknown>) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstreamUrl] }),
  plugins: [{ name: 'compression', ...plugin }],
});

beforeAll(async () => {
  upstream = createServer(handle);
  upstreamUrl = `http://127.0.0.1:${await listen(upstream, 0, '127.0.0.1')}`;
  gw = await startGateway();
  await createApis(gw, [
    api('cz', { enabled: true }),
    api('cz-cfg', { config: { min_size: 5, content_types: 'application/x-custom', encodings: ['gzip'] } }),
    api('cz-off', { enabled: false }),
  ]);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  for (const s of eventStreams) s.destroy();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  expect(problems).toBe('');
});

const get = (path: string, acceptEncoding?: string, method = 'GET') =>
  gw.dp.request(method, path, { headers: acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding } });

test.each([
  ['gzip', 'gzip', gunzipSync],
  ['br', 'br', brotliDecompressSync],
  ['br (preferred when both are equal)', 'gzip, deflate, br', brotliDecompressSync],
  ['gzip (higher q)', 'br;q=0.5, gzip', gunzipSync],
])('%s: the body decodes to the upstream bytes; length dropped, Vary added, ETag weakened', async (_row, accept, decode) => {
  const res = await get('/cz/json', accept);
  expect(res.status).toBe(200);
  const encoding = decode === gunzipSync ? 'gzip' : 'br';
  expect(res.headers['content-encoding']).toBe(encoding);
  expect(res.headers['content-length']).toBeUndefined();
  expect(res.headers['accept-ranges']).toBeUndefined();
  expect(res.headers.vary).toBe('Accept-Encoding');
  expect(res.headers.etag).toBe('W/"v1"');
  expect(res.body.length).toBeLessThan(JSON_BODY.length / 3);
  expect(decode(res.body).equals(JSON_BODY)).toBe(true);
});

test.each([
  ['gzip', gunzipSync],
  ['br', brotliDecompressSync],
])('a 2 MiB chunked %s body streams through and decodes to the upstream bytes', async (accept, decode) => {
  const res = await get('/cz/big', accept);
  expect(res.status).toBe(200);
  expect(res.headers['content-encoding']).toBe(accept);
  expect(res.headers['transfer-encoding']).toBe('chunked');
  expect(decode(res.body).equals(BIG_TEXT)).toBe(true);
});

test.each([
  ['no Accept-Encoding', undefined],
  ['an empty Accept-Encoding', ''],
  ['only codings the gateway lacks', 'deflate, zstd'],
  ['every offered coding refused', 'gzip;q=0, br;q=0'],
  ['identity weighed above gzip', 'identity, gzip;q=0.5'],
])('%s: identity, still with Vary', async (_row, accept) => {
  const res = await get('/cz/json', accept);
  expect(res.headers['content-encoding']).toBeUndefined();
  expect(res.headers['content-length']).toBe(String(JSON_BODY.length));
  expect(res.headers.vary).toBe('Accept-Encoding');
  expect(res.body.equals(JSON_BODY)).toBe(true);
});

test.each([
  ['below min_size (Content-Length known)', '/cz/small', SMALL_JSON],
  ['a type not listed (image/png)', '/cz/png', PNG],
  ['Cache-Control: no-transform', '/cz/no-transform', JSON_BODY],
])('%s: sent as the upstream sent it', async (_row, path, body) => {
  const res = await get(path, 'gzip, br');
  expect(res.status).toBe(200);
  expect(res.headers['content-encoding']).toBeUndefined();
  expect(res.headers['content-length']).toBe(String(body.length));
  expect(res.body.equals(body)).toBe(true);
});

test('an upstream that already encoded its body is left untouched, byte for byte', async () => {
  const res = await get('/cz/gzipped', 'br');
  expect(res.headers['content-encoding']).toBe('gzip');
  expect(res.body.equals(gzipSync(JSON_BODY))).toBe(true);
  expect(gunzipSync(res.body).equals(JSON_BODY)).toBe(true);
});

test("the upstream's Vary is kept and Accept-Encoding appended", async () => {
  const res = await get('/cz/vary', 'gzip');
  expect(res.headers.vary).toBe('Origin, Accept-Encoding');
  expect(gunzipSync(res.body).equals(JSON_BODY)).toBe(true);
});

test.each([
  ['HEAD', 'HEAD', '/cz/json', 200],
  ['204', 'GET', '/cz/204', 204],
  ['304', 'GET', '/cz/304', 304],
])('%s responses are never compressed', async (_row, method, path, status) => {
  const res = await get(path, 'gzip, br', method);
  expect(res.status).toBe(status);
  expect(res.headers['content-encoding']).toBeUndefined();
  expect(res.body.length).toBe(0);
  if (method === 'HEAD') expect(res.headers['content-length']).toBe(String(JSON_BODY.length));
});

test('min_size, content_types and encodings as configured', async () => {
  const custom = await get('/cz-cfg/custom', 'br, gzip');
  expect(custom.headers['content-encoding']).toBe('gzip'); // br not offered
  expect(gunzipSync(custom.body).equals(SMALL_JSON)).toBe(true); // 11 bytes >= min_size 5
  const json = await get('/cz-cfg/json', 'gzip');
  expect(json.headers['content-encoding']).toBeUndefined(); // application/json not listed here
  expect(json.headers.vary).toBeUndefined();
});

test('enabled: false does nothing', async () => {
  const res = await get('/cz-off/json', 'gzip, br');
  expect(res.headers['content-encoding']).toBeUndefined();
  expect(res.headers.vary).toBeUndefined();
  expect(res.body.equals(JSON_BODY)).toBe(true);
});

test('a streamed response reaches the client chunk by chunk: the compressor flushes when the upstream pauses', async () => {
  const chunks: Buffer[] = [];
  let ended = false;
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${gw.dp.proxyUrl}/cz/events`, { headers: { 'accept-encoding': 'gzip' }, agent: false }, resolve);
    req.on('error', reject);
    req.end();
  });
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => (ended = true));
  expect(res.headers['content-encoding']).toBe('gzip');
  // The upstream has not ended: what arrived so far decodes (sync-flushed) to the first event.
  const soFar = () => gunzipSync(Buffer.concat(chunks), { finishFlush: constants.Z_SYNC_FLUSH }).toString();
  await pollUntil(async () => (chunks.length > 0 && soFar() === 'data: first\n\n' ? true : undefined), { timeoutMs: 5_000, what: 'first event' });
  expect(ended).toBe(false);
  await get('/cz/events-end');
  await pollUntil(async () => (ended ? true : undefined), { timeoutMs: 5_000, what: 'end of stream' });
  expect(gunzipSync(Buffer.concat(chunks)).toString()).toBe('data: first\n\ndata: last\n\n');
});

test('a client that leaves mid-stream closes the upstream exchange (the compressor goes with it)', async () => {
  await new Promise<void>((resolve, reject) => {
    const req = request(`${gw.dp.proxyUrl}/cz/slow-stream`, { headers: { 'accept-encoding': 'br' }, agent: false }, (res) => {
      expect(res.headers['content-encoding']).toBe('br');
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => undefined);
    req.end();
    setTimeout(() => reject(new Error('no data')), 5_000);
  });
  await pollUntil(async () => (upstreamClosedEarly.length > 0 ? true : undefined), { timeoutMs: 5_000, what: 'upstream response closed' });
  expect(upstreamClosedEarly).toEqual(['/cz/slow-stream']);
});

test('a bad configuration is refused naming the field, and the stored definition stays as it was', async () => {
  const before = await gw.admin.getApi('cz-cfg');
  const res = await gw.admin.updateApi('cz-cfg', { plugins: [{ name: 'compression', config: { min_size: -5 } }] });
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ error: 'plugins[0].config.min_size must be at least 0' });
  const created = await gw.admin.createApi(api('cz-bad', { config: { content_types: ['text/'] } }));
  expect(created.status).toBe(400);
  expect(created.body.error).toBe('plugins[0].config.content_types[0] must be a media type such as "application/json", "text/*" or "application/*+json"');
  expect((await gw.admin.getApi('cz-cfg')).body).toEqual(before.body);
  expect((await gw.admin.getApi('cz-cfg')).body.plugins[0].config).toEqual({ min_size: 5, content_types: ['application/x-custom'], encodings: ['gzip'] });
});
