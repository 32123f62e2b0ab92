/**
 * Who the client is, through a real control plane, two real data planes and real upstreams: one data plane with no
 * TRUSTED_PROXIES (its clients connect directly: the TCP peer is the client, forwarded headers are never believed),
 * one with TRUSTED_PROXIES=127.0.0.0/8 (this process stands for the load balancer in front of it). What the upstream
 * is told (X-Forwarded-For/-Proto/-Host), what ip_restriction and rate_limit count, what proxy_cache keys, what the
 * access log writes and when openid_connect's cookies are Secure all follow that one model; rotating X-Real-IP or
 * X-Forwarded-For gets a client nothing. `trust_forward_headers` is still accepted and changes nothing.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc-provider.js';
import { pollUntil } from '../helpers/poll-until.js';
import { expectDataPlaneRefusesToStart, startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;
let idp: OidcProvider;
/** No TRUSTED_PROXIES: this test process is the client itself. */
let direct: DataPlane;
/** TRUSTED_PROXIES=127.0.0.0/8: this test process is the proxy in front, X-Forwarded-For what it saw. */
let behind: DataPlane;

const api = (name: string, plugins: unknown[] = []) => ({ ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }), plugins });
/** The request the echo upstream got, as it echoed it. */
const echoed = (body: unknown) => body as { url: string; headers: Record<string, string | undefined> };

beforeAll(async () => {
  u = await startUpstream('trust-echo', { kind: 'echo' });
  idp = await startOidcProvider();
  gw = await startGateway();
  direct = gw.dp;
  behind = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { TRUSTED_PROXIES: '127.0.0.0/8' } });
  gw.dps.push(behind);
  await createApis(gw, [
    api('plain'),
    // trust_forward_headers is what these configurations said when clients chose their address: it stays accepted.
    api('allow-doc', [{ name: 'ip_restriction', config: { allow: ['203.0.113.0/24'], trust_forward_headers: true } }]),
    api('limited', [{ name: 'rate_limit', config: { limit: '2-M', trust_forward_headers: true } }]),
    api('cached', [{ name: 'proxy_cache', config: {} }]),
    api('app', [
      {
        name: 'openid_connect',
        config: { issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, cookie_secret: 'a cookie secret of at least 32 characters!' },
      },
    ]),
  ]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u, idp)).toBe('');
});

describe('a data plane without TRUSTED_PROXIES', () => {
  test("the client's X-Forwarded-Proto and -Host are replaced by what the gateway knows; X-Forwarded-For gets the peer appended", async () => {
    const res = await direct.request('GET', '/plain/x', {
      headers: { host: 'shop.test', 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.test' },
    });
    expect(res.status).toBe(200);
    const seen = echoed(res.json).headers;
    expect([seen['x-forwarded-for'], seen['x-forwarded-proto'], seen['x-forwarded-host']]).toEqual(['203.0.113.9, 127.0.0.1', 'http', 'shop.test']);
  });

  test('a forged X-Forwarded-Host cannot poison the cache: the next client gets what its own request would', async () => {
    const attacker = await direct.request('GET', '/cached/poison', {
      headers: { host: 'shop.test', 'x-forwarded-host': 'evil.test', 'x-forwarded-proto': 'https' },
    });
    expect(attacker.headers['x-cache-status']).toBe('Miss');
    const victim = await direct.request('GET', '/cached/poison', { headers: { host: 'shop.test' } });
    expect(victim.status).toBe(200);
    expect(victim.text).not.toContain('evil.test');
    expect(echoed(victim.json).headers['x-forwarded-host']).toBe('shop.test');
    expect(echoed(victim.json).headers['x-forwarded-proto']).toBe('http');
  });

  test('ip_restriction: X-Real-IP or X-Forwarded-For naming an allowed address get no one in', async () => {
    for (const headers of [{ 'x-real-ip': '203.0.113.9' }, { 'x-forwarded-for': '203.0.113.9' }, { 'x-forwarded-for': 'junk', 'x-real-ip': '203.0.113.9' }]) {
      const res = await direct.request('GET', '/allow-doc/x', { headers });
      expect([JSON.stringify(headers), res.status]).toEqual([JSON.stringify(headers), 403]);
    }
  });

  test('rate_limit: rotating X-Real-IP and X-Forwarded-For does not make a new client', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 5; i++) {
      const res = await direct.request('GET', '/limited/x', { headers: { 'x-real-ip': `198.51.100.${i}`, 'x-forwarded-for': `192.0.2.${i}` } });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 429, 429, 429]);
  });

  test('openid_connect: X-Forwarded-Proto https from a client does not make the redirect https (nor is it believed)', async () => {
    const res = await direct.request('GET', '/app/x', { headers: { accept: 'text/html', 'x-forwarded-proto': 'https' } });
    expect(res.status).toBe(302);
    expect(new URL(String(res.headers.location)).searchParams.get('redirect_uri')).toBe(`${direct.proxyUrl}/app/callback`);
    expect(String(res.headers['set-cookie'])).not.toContain('Secure');
  });
});

describe('a data plane behind a trusted proxy (TRUSTED_PROXIES=127.0.0.0/8)', () => {
  test("the proxy's X-Forwarded-* are kept, the peer appended to X-Forwarded-For", async () => {
    const res = await behind.request('GET', '/plain/x', {
      headers: { host: 'internal:8080', 'x-forwarded-for': '198.51.100.4', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'shop.example.com' },
    });
    const seen = echoed(res.json).headers;
    expect([seen['x-forwarded-for'], seen['x-forwarded-proto'], seen['x-forwarded-host']]).toEqual(['198.51.100.4, 127.0.0.1', 'https', 'shop.example.com']);
  });

  test('a list or an unknown scheme from the proxy is not believed: the listener scheme and the Host', async () => {
    const res = await behind.request('GET', '/plain/x', {
      headers: { host: 'internal:8080', 'x-forwarded-proto': 'https, http', 'x-forwarded-host': 'a.test, b.test' },
    });
    const seen = echoed(res.json).headers;
    expect([seen['x-forwarded-proto'], seen['x-forwarded-host']]).toEqual(['http', 'internal:8080']);
  });

  test("proxy_cache keys the host and scheme the proxy forwarded: one host never gets another's entry", async () => {
    const a = await behind.request('GET', '/cached/page', { headers: { 'x-forwarded-host': 'a.example.com' } });
    const b = await behind.request('GET', '/cached/page', { headers: { 'x-forwarded-host': 'b.example.com' } });
    expect([a.headers['x-cache-status'], b.headers['x-cache-status']]).toEqual(['Miss', 'Miss']);
    expect(echoed(b.json).headers['x-forwarded-host']).toBe('b.example.com');
    const again = await behind.request('GET', '/cached/page', { headers: { 'x-forwarded-host': 'a.example.com' } });
    expect(again.headers['x-cache-status']).toBe('Hit');
    expect(echoed(again.json).headers['x-forwarded-host']).toBe('a.example.com');
  });

  test('ip_restriction judges the right-most address the proxy did not vouch for; X-Real-IP and entries to its left count for nothing', async () => {
    const status = async (headers: Record<string, string>) => (await behind.request('GET', '/allow-doc/x', { headers })).status;
    expect(await status({ 'x-forwarded-for': '203.0.113.9' })).toBe(200);
    expect(await status({ 'x-forwarded-for': '203.0.113.9, 198.51.100.7' })).toBe(403);
    expect(await status({ 'x-forwarded-for': '203.0.113.9, 127.0.0.5' })).toBe(200);
    // A non-IP entry stops the walk at the last trusted hop (the proxy): never at the client's X-Real-IP.
    expect(await status({ 'x-forwarded-for': 'unknown', 'x-real-ip': '203.0.113.9' })).toBe(403);
    expect(await status({ 'x-real-ip': '203.0.113.9' })).toBe(403);
  });

  test('rate_limit counts the client the proxy saw, whatever the client wrote to the left of it', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 4; i++) {
      const res = await behind.request('GET', '/limited/x', { headers: { 'x-forwarded-for': `192.0.2.${i}, 203.0.113.50`, 'x-real-ip': `198.51.100.${i}` } });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 429, 429]);
    // Another client behind the same proxy has its own count.
    expect((await behind.request('GET', '/limited/x', { headers: { 'x-forwarded-for': '203.0.113.51' } })).status).toBe(200);
  });

  test("the access log's clientIp is the client the proxy saw", async () => {
    await behind.request('GET', '/plain/logged-client', { headers: { 'x-forwarded-for': '192.0.2.1, 203.0.113.77' } });
    await pollUntil(async () => (behind.recentLogs(200).includes('"clientIp":"203.0.113.77"') ? true : undefined), {
      timeoutMs: 5000,
      what: 'the access log line',
    });
    expect(behind.recentLogs(200)).not.toContain('"clientIp":"192.0.2.1"');
  });

  test('openid_connect: behind a proxy that terminated TLS (X-Forwarded-Proto: https) the redirect_uri is https and the cookie Secure', async () => {
    const res = await behind.request('GET', '/app/x', { headers: { accept: 'text/html', host: 'shop.example.com', 'x-forwarded-proto': 'https' } });
    expect(res.status).toBe(302);
    expect(new URL(String(res.headers.location)).searchParams.get('redirect_uri')).toBe('https://shop.example.com/app/callback');
    expect(String(res.headers['set-cookie'])).toMatch(/^gatehouse_oidc_flow=[\w-]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/);
  });
});

test('TRUSTED_PROXIES that is not a list of addresses and ranges stops the data plane with the entry named', async () => {
  await expectDataPlaneRefusesToStart(
    gw.cp.grpcAddr,
    { TRUSTED_PROXIES: '10.0.0.0/8, lb.internal' },
    'TRUSTED_PROXIES: expected IP addresses and CIDR ranges such as \\"10.0.0.0/8\\" or \\"2001:db8::/32\\", separated by commas, got \\"lb.internal\\"',
  );
});
