/**
 * body_limit through a real control plane and data plane: a Content-Length over the limit is
 * refused before the upstream sees anything; a chunked body is counted while it streams and the
 * upstream request is aborted once the limit is passed (the client gets the 413); bodies within
 * the limit pass whole; `enabled: false` does nothing; bad limits are refused naming the field.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { pollUntil } from '../helpers/poll-until.js';
import { postChunked } from '../helpers/post-chunked.js';
import { createApis } from '../helpers/create-apis.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

beforeAll(async () => {
  u = await startUpstream('limit-upstream', { kind: 'echo' });
  gw = await startGateway();
  const apis = [
    { ...apiDefinition({ name: 'limited', listenPath: '/limited/*', targets: [u.url] }), plugins: [{ name: 'body_limit', config: { limit: '1k' } }] },
    {
      ...apiDefinition({ name: 'unlimited', listenPath: '/unlimited/*', targets: [u.url] }),
      plugins: [{ name: 'body_limit', enabled: false, config: { limit: '1K' } }],
    },
  ];
  await createApis(gw, apis);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

/** `chunks` chunks of `size` bytes, chunked. */
const postChunkedBytes = (path: string, chunks: number, size: number) =>
  postChunked(
    gw.dp.proxyPort,
    path,
    Array.from({ length: chunks }, () => Buffer.alloc(size, 0x61)),
  );

const seenAt = (prefix: string) => ({
  completed: u.requests.filter((r) => r.url.startsWith(prefix)),
  aborted: u.aborted.filter((r) => r.url.startsWith(prefix)),
});

test('a Content-Length over the limit is a 413 JSON error, and the upstream sees nothing', async () => {
  const res = await gw.dp.request('POST', '/limited/too-big', { body: Buffer.alloc(1025, 0x61) });
  expect(res.status).toBe(413);
  expect(res.headers['content-type']).toBe('application/json');
  expect(res.json).toBe('request body too large');
  expect(res.headers['x-request-id']).toBeDefined();
  expect(res.headers.connection).toBe('close');
  // A later request through the same route does reach the upstream, so "nothing" is not a race.
  expect((await gw.dp.request('GET', '/limited/after')).status).toBe(200);
  expect(seenAt('/limited/too-big')).toEqual({ completed: [], aborted: [] });
});

test('a body of exactly the limit passes whole', async () => {
  const res = await gw.dp.request('POST', '/limited/exact', { body: Buffer.alloc(1024, 0x61) });
  expect(res.status).toBe(200);
  expect((res.json as { bodyLength: number }).bodyLength).toBe(1024);
});

test('a chunked body is counted while streaming: past the limit the upstream request is aborted and the client gets 413', async () => {
  const res = await postChunkedBytes('/limited/chunked-big', 16, 256);
  expect(res.status).toBe(413);
  expect(JSON.parse(res.text)).toBe('request body too large');
  const aborted = await pollUntil(async () => (seenAt('/limited/chunked-big').aborted.length > 0 ? seenAt('/limited/chunked-big').aborted : undefined), {
    what: 'the upstream to see the chunked request aborted',
    timeoutMs: 5_000,
  });
  expect(aborted[0].bodyLength).toBeLessThanOrEqual(1024);
  expect(seenAt('/limited/chunked-big').completed).toEqual([]);
});

test('a chunked body within the limit passes whole', async () => {
  const res = await postChunkedBytes('/limited/chunked-small', 4, 256);
  expect(res.status).toBe(200);
  expect(JSON.parse(res.text).bodyLength).toBe(1024);
});

test('enabled: false does nothing: bodies over the limit pass, with Content-Length and chunked', async () => {
  const res = await gw.dp.request('POST', '/unlimited/x', { body: Buffer.alloc(4096, 0x61) });
  expect(res.status).toBe(200);
  expect((res.json as { bodyLength: number }).bodyLength).toBe(4096);
  const chunked = await postChunkedBytes('/unlimited/y', 16, 256);
  expect(chunked.status).toBe(200);
  expect(JSON.parse(chunked.text).bodyLength).toBe(4096);
});

test.each([
  ['not a size', { limit: 'lots' }, 'plugins[0].config.limit must be a size such as "10B", "512K", "1M" or "2G"'],
  ['an unknown unit', { limit: '10X' }, 'plugins[0].config.limit must be a size such as "10B", "512K", "1M" or "2G"'],
  ['missing', {}, 'plugins[0].config.limit is required'],
])('a limit %s is refused with 400 naming the field, store unchanged', async (_row, config, message) => {
  const before = await gw.admin.getApi('limited');
  const res = await gw.admin.updateApi('limited', { plugins: [{ name: 'body_limit', config }] });
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ error: message });
  expect((await gw.admin.getApi('limited')).body).toEqual(before.body);
});

test('the stored limit is normalised ("1k" is shown as "1K")', async () => {
  const res = await gw.admin.getApi('limited');
  expect(res.body.plugins).toEqual([{ name: 'body_limit', enabled: true, config: { limit: '1K' } }]);
});
