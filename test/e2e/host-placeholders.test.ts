/**
 * Placeholders in a target's host (docs/proxy.md "Proxy behaviour", Host placeholders), against a real CP, DP and upstream:
 * a client naming the loopback address, `localhost` or a link-local address in the path does not reach it (400
 * BAD_UPSTREAM_HOST, nothing dialled); a placeholder fills one DNS label unless the target's host_pattern widens it.
 * A value that passes is dialled: `.invalid` names (RFC 6761) never resolve, so that request ends in 502.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { httpRequest } from '../helpers/http-request.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
/** Listens on 127.0.0.1: what a client would reach by naming the loopback address in the path. */
let local: Upstream;

beforeAll(async () => {
  local = await startUpstream('local', { kind: 'echo' });
  gw = await startGateway();
  const wide = apiDefinition({ name: 'wide', listenPath: '/wide/{service}/*', targets: [`http://{service}:${local.port}`], stripPath: true });
  (wide.proxy as { upstreams: { targets: Array<Record<string, unknown>> } }).upstreams.targets[0]!.host_pattern = '[a-z0-9-]+\\.ns\\.invalid|localhost|[0-9.]+';
  await createApis(gw, [
    apiDefinition({ name: 'svc', listenPath: '/svc/{service}/*', targets: [`http://{service}:${local.port}`], stripPath: true }),
    apiDefinition({ name: 'zone', listenPath: '/zone/{service}/*', targets: [`http://{service}.invalid:${local.port}`], stripPath: true }),
    wide,
  ]);
}, 90_000);

afterAll(async () => {
  const problems = await gw?.stop();
  await local?.close();
  expect(problems).toBe('');
});

const get = (path: string) => httpRequest(`http://127.0.0.1:${gw.dp.proxyPort}${path}`, { timeoutMs: 15_000 });

test.each([
  ['the loopback address', '/svc/127.0.0.1/x'],
  ['localhost', '/svc/localhost/x'],
  ['localhost in capitals', '/svc/LOCALHOST/x'],
  ['the loopback address as one number', '/svc/2130706433/x'],
  ['the loopback address in hex', '/svc/0x7f000001/x'],
  ['the link-local metadata address', '/svc/169.254.169.254/x'],
  ['a name of two labels', '/svc/orders.example/x'],
  ['the loopback address, through a host_pattern that lets digits and dots through', '/wide/127.0.0.1/x'],
  ['localhost, through a host_pattern that names it', '/wide/localhost/x'],
  ['a name outside the host_pattern', '/wide/orders.other.invalid/x'],
])('a client naming %s in a host placeholder gets 400 BAD_UPSTREAM_HOST and reaches nothing', async (_name, path) => {
  const before = local.requests.length;
  const got = await get(path);
  expect(got.status).toBe(400);
  expect(got.json).toBe('invalid upstream host');
  expect(local.requests.length).toBe(before);
});

test('a one-label value is dialled (502 for a name that never resolves), and so is a name the host_pattern allows', async () => {
  expect((await get('/zone/orders/x')).status).toBe(502);
  expect((await get('/wide/orders.ns.invalid/x')).status).toBe(502);
});

test('host_pattern is stored, and refused on a target without a host placeholder or when it is no regex', async () => {
  const stored = (await gw.admin.getApi('wide')).body as { proxy: { upstreams: { targets: Array<{ host_pattern?: string }> } } };
  expect(stored.proxy.upstreams.targets[0]!.host_pattern).toBe('[a-z0-9-]+\\.ns\\.invalid|localhost|[0-9.]+');
  for (const [target, pattern] of [
    [local.url, 'a'],
    [`http://{service}:${local.port}`, '('],
  ]) {
    const bad = apiDefinition({ name: 'bad-pattern', listenPath: '/bad/{service}/*', targets: [target!] });
    (bad.proxy as { upstreams: { targets: Array<Record<string, unknown>> } }).upstreams.targets[0]!.host_pattern = pattern;
    const refused = await gw.admin.createApi(bad);
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('proxy.upstreams.targets[0].host_pattern');
  }
  expect((await gw.admin.getApi('bad-pattern')).status).toBe(404);
});
