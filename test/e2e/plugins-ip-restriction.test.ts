/**
 * ip_restriction through a real control plane and data plane, traffic counted at a real upstream:
 * an allowed client is forwarded; a client outside `allow` or inside `deny` gets 403 without upstream
 * traffic (deny wins over allow); X-Forwarded-For and X-Real-IP are ignored without TRUSTED_PROXIES, whatever
 * `trust_forward_headers` says (test/e2e/client-address-trust.test.ts has the model behind a trusted proxy); it runs before rate_limit, so refused requests
 * use no quota; `enabled: false` does nothing; bad configurations are refused naming the field.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const restricted = (name: string, config: unknown, extra: unknown[] = [], enabled = true) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }),
  plugins: [{ name: 'ip_restriction', enabled, config }, ...extra],
});
const seen = (name: string) => u.requests.filter((r) => r.url.startsWith(`/${name}/`)).length;
const get = (path: string, headers: Record<string, string> = {}) => gw.dp.request('GET', path, { headers });

beforeAll(async () => {
  u = await startUpstream('ipr-upstream');
  gw = await startGateway();
  await createApis(gw, [
    restricted('loopback', { allow: ['127.0.0.1'] }),
    restricted('private', { allow: ['10.0.0.0/8', '2001:db8::/32'] }),
    restricted('deny-loopback', { deny: ['127.0.0.0/8'] }),
    restricted('deny-other', { deny: ['10.0.0.0/8'] }),
    restricted('deny-wins', { allow: ['127.0.0.0/8'], deny: ['127.0.0.1'] }),
    restricted('behind-lb', { allow: ['203.0.113.0/24'], trust_forward_headers: true }),
    restricted('untrusted', { allow: ['203.0.113.0/24'] }),
    restricted('before-quota', { deny: ['127.0.0.1'] }, [{ name: 'rate_limit', config: { limit: '1-M' } }]),
    restricted('off', { allow: ['10.0.0.0/8'] }, [], false),
  ]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

beforeEach(() => u.reset());

test('a client in allow is forwarded', async () => {
  expect((await get('/loopback/x')).status).toBe(200);
  expect(seen('loopback')).toBe(1);
});

test.each(['private', 'deny-loopback', 'deny-wins'])('%s: refused with 403 "client address not allowed", the upstream never asked', async (name) => {
  const res = await get(`/${name}/x`);
  expect(res.status).toBe(403);
  expect(res.headers['content-type']).toBe('application/json');
  expect(res.json).toBe('client address not allowed');
  expect(res.headers['x-request-id']).toBeDefined();
  expect(seen(name)).toBe(0);
  // The log line reaches this process through the DP's stdout pipe, after the response may have.
  await pollUntil(async () => (gw.dp.recentLogs(50).includes('client address 127.0.0.1 is not allowed') ? true : undefined), {
    what: 'the refusal logged with the address',
    details: () => gw.dp.recentLogs(20),
  });
});

test('a deny list that does not hold the client lets it through', async () => {
  expect((await get('/deny-other/x')).status).toBe(200);
});

test('trust_forward_headers is accepted and changes nothing: without TRUSTED_PROXIES the TCP peer is the client', async () => {
  expect((await get('/behind-lb/x', { 'x-forwarded-for': '198.51.100.1, 203.0.113.9' })).status).toBe(403);
  expect((await get('/behind-lb/x', { 'x-real-ip': '203.0.113.9' })).status).toBe(403);
  expect((await get('/behind-lb/x')).status).toBe(403);
  expect(seen('behind-lb')).toBe(0);
});

test('without trust_forward_headers a forged X-Forwarded-For changes nothing', async () => {
  expect((await get('/untrusted/x', { 'x-forwarded-for': '203.0.113.9' })).status).toBe(403);
  expect(seen('untrusted')).toBe(0);
});

test('it runs before rate_limit: refused requests use none of the quota', async () => {
  for (let i = 0; i < 3; i++) expect((await get('/before-quota/x')).status).toBe(403);
});

test('enabled: false does nothing', async () => {
  expect((await get('/off/x')).status).toBe(200);
});

test.each([
  [{}, 'plugins[0].config must list at least one address or range in "allow" or "deny"'],
  [{ allow: ['10.0.0.0/33'] }, 'plugins[0].config.allow[0] must be an IP address or a CIDR range such as "10.0.0.0/8" or "2001:db8::/32"'],
  [{ deny: ['10.0.0.1', 'example.com'] }, 'plugins[0].config.deny[1] must be an IP address or a CIDR range such as "10.0.0.0/8" or "2001:db8::/32"'],
  [{ allow: '10.0.0.0/8' }, 'plugins[0].config.allow must be an array'],
  [{ allow: ['10.0.0.0/8'], trust_forward_headers: 'yes' }, 'plugins[0].config.trust_forward_headers must be a boolean'],
])('refuses %j naming the field, the store unchanged', async (config, message) => {
  await expectRefusedPluginConfig(
    gw,
    {
      definition: apiDefinition({ name: 'bad-ipr', listenPath: '/bad-ipr/*', targets: [u.url] }),
      existing: 'loopback',
      plugins: [{ name: 'ip_restriction', config }],
    },
    message,
  );
});

test('entries are stored canonical: trimmed, lower-cased, IPv4-mapped IPv6 as IPv4', async () => {
  await createApis(gw, [restricted('canonical', { allow: [' 2001:DB8::1 ', '::ffff:10.1.2.3', '::ffff:10.1.0.0/112'] })]);
  expect((await gw.admin.getApi('canonical')).body.plugins[0].config).toEqual({
    allow: ['2001:db8::1', '10.1.2.3', '10.1.0.0/16'],
    deny: [],
    trust_forward_headers: false,
  });
});
